#include "backend_choice.hpp"

#include "core/strings.hpp"
#include "ratelimit/backends/memcache/module.hpp"
#include "ratelimit/backends/memory/module.hpp"
#include "ratelimit/backends/redis/module.hpp"

namespace sluice {

namespace backends = ratelimit::backends;

backend_settings read_backend_settings(const core::env_reader& env, const ratelimit::module_settings& rl) {
  const auto& type = rl.backend_type;
  const bool admitted_only = rl.service.count_only_admitted;
  if (type != "memory") backends::memory::refuse_memory_settings(env, type);
  if (type != "redis") backends::redis::refuse_redis_settings(env, type);
  if (type == "redis") {
    auto redis = backends::redis::read_redis_settings(env, rl.tables.redis, admitted_only);
    if (redis.regions) redis.regions->key_prefix = rl.limiter.cache_key_prefix;  // the heartbeat's key
    return redis;
  }
  if (type == "memcache") return backends::memcache::read_memcache_settings(env, admitted_only);
  return backends::memory::read_memory_settings(env);
}

ratelimit::service::rules_source::limit_check backend_limit_check(const backend_settings& settings) {
  using ratelimit::config::algorithm_name;
  using verdict = ratelimit::service::rules_source::limit_verdict;
  if (const auto* redis = std::get_if<backends::redis::redis_settings>(&settings)) {
    return [regions = redis->regions](const auto&, const auto& limit) {
      auto why = backends::redis::region_refuses_algorithm(regions, algorithm_name(limit.algorithm));
      return why ? verdict{std::move(*why), true} : verdict{};
    };
  }
  if (std::holds_alternative<backends::memcache::memcache_settings>(settings)) {
    return [](const auto& rule, const auto& limit) {
      auto why = backends::memcache::memcache_cannot_count(algorithm_name(limit.algorithm),
                                                           rule.count_only_admitted);
      return why ? verdict{core::cat(*why, ": its requests are answered UNAVAILABLE"), false} : verdict{};
    };
  }
  return [](const auto&, const auto&) { return verdict{}; };
}

std::unique_ptr<backends::module> start_backend(const backend_settings& settings,
                                                const backends::start_context& context) {
  return std::visit(
      [&](const auto& s) -> std::unique_ptr<backends::module> {
        using type = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<type, backends::redis::redis_settings>) {
          return std::make_unique<backends::redis::redis_module>(s, context);
        } else if constexpr (std::is_same_v<type, backends::memcache::memcache_settings>) {
          return std::make_unique<backends::memcache::memcache_module>(s, context);
        } else {
          return std::make_unique<backends::memory::memory_module>(s, context);
        }
      },
      settings);
}

}  // namespace sluice
