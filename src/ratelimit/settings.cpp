#include "ratelimit/settings.hpp"

#include "core/strings.hpp"

namespace sluice::ratelimit {

module_settings read_module_settings(const core::env_reader& env) {
  module_settings s;
  auto config_type = env.get_choice("CONFIG_TYPE", "FILE", {"FILE", "GRPC_XDS_SOTW"}, false);
  if (config_type != "FILE") {
    throw core::settings_error(
        "CONFIG_TYPE=GRPC_XDS_SOTW (rules from an xDS server) is not supported yet; use FILE");
  }
  s.backend_type = env.get_choice("BACKEND_TYPE", "redis", {"redis", "memcache", "memory"}, false);
  s.force_start_without_initial_config = env.get_bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false);
  s.memory_max_counters = env.get_uint("MEMORY_MAX_COUNTERS", s.memory_max_counters, 1024, 1'000'000'000);

  auto& layout = s.rules.layout;
  layout.root = env.get_string("RUNTIME_ROOT", layout.root);
  layout.subdirectory = env.get_string("RUNTIME_SUBDIRECTORY", "");
  layout.app_directory = env.get_string("RUNTIME_APPDIRECTORY", layout.app_directory);
  layout.ignore_dotfiles = env.get_bool("RUNTIME_IGNOREDOTFILES", false);
  layout.watch_root = env.get_bool("RUNTIME_WATCH_ROOT", true);
  s.rules.merge_domain_config = env.get_bool("MERGE_DOMAIN_CONFIG", false);
  s.rules.healthy_with_at_least_one_config_loaded =
      env.get_bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false);

  auto& svc = s.service;
  svc.global_shadow_mode = env.get_bool("SHADOW_MODE", false);
  svc.response_headers_enabled = env.get_bool("LIMIT_RESPONSE_HEADERS_ENABLED", false);
  svc.limit_header = env.get_string("LIMIT_LIMIT_HEADER", svc.limit_header);
  svc.remaining_header = env.get_string("LIMIT_REMAINING_HEADER", svc.remaining_header);
  svc.reset_header = env.get_string("LIMIT_RESET_HEADER", svc.reset_header);

  auto& lim = s.limiter;
  lim.near_limit_ratio = env.get_double("NEAR_LIMIT_RATIO", 0.8, 0.0, 1.0);
  lim.cache_key_prefix = env.get_string("CACHE_KEY_PREFIX", "");
  lim.expiration_jitter_max_seconds =
      static_cast<std::uint32_t>(env.get_uint("EXPIRATION_JITTER_MAX_SECONDS", 300, 0, 86'400'000));
  lim.local_cache_size_bytes = env.get_uint("LOCAL_CACHE_SIZE_IN_BYTES", 0, 0, std::uint64_t{1} << 40);
  lim.stop_cache_key_increment_when_overlimit =
      env.get_bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false);
  return s;
}

}  // namespace sluice::ratelimit
