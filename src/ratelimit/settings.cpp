#include "ratelimit/settings.hpp"

#include "ratelimit/rlqs_settings.hpp"
#include "ratelimit/xds_settings.hpp"

#include "core/strings.hpp"

#include <algorithm>
#include <cctype>

namespace sluice::ratelimit {

namespace {

// An HTTP field name (RFC 9110 token): Envoy refuses a header it cannot send, so refuse it at start-up.
std::string header_name(const core::env_reader& env, const std::string& name, const std::string& fallback) {
  auto value = env.get_string(name, fallback);
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  const bool token = !value.empty() && std::ranges::all_of(value, [](unsigned char c) {
    return std::isalnum(c) != 0 || extra.find(static_cast<char>(c)) != std::string_view::npos;
  });
  if (!token) {
    throw core::settings_error(
        core::cat("invalid value '", value, "' for ", name,
                  ": expected an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"));
  }
  return value;
}

service::limit_header_names read_header_names(const core::env_reader& env, const std::string& prefix) {
  service::limit_header_names names;
  names.limit = header_name(env, prefix + "LIMIT_HEADER", names.limit);
  names.remaining = header_name(env, prefix + "REMAINING_HEADER", names.remaining);
  names.reset = header_name(env, prefix + "RESET_HEADER", names.reset);
  return names;
}

// CONFIG_TYPE: FILE, GRPC_XDS_SOTW, or both, comma-separated (the rules of both are served together).
void read_rule_sources(const core::env_reader& env, module_settings& s) {
  const std::string value = env.get_string("CONFIG_TYPE", "FILE");
  bool files = false;
  bool xds = false;
  for (auto part : core::split(value, ',')) {
    const auto name = core::trim_space(part);
    bool* listed = name == "FILE" ? &files : name == "GRPC_XDS_SOTW" ? &xds : nullptr;
    if (!listed) {
      throw core::settings_error(
          core::cat("invalid value '", value,
                    "' for CONFIG_TYPE: expected FILE, GRPC_XDS_SOTW, or both comma-separated"));
    }
    if (*listed)
      throw core::settings_error(
          core::cat("invalid value '", value, "' for CONFIG_TYPE: ", name, " is listed twice"));
    *listed = true;
  }
  s.rules.from_files = files;
  s.rules.from_xds = xds;
  if (xds) s.xds = read_xds_settings(env);
}

// LIMIT_TABLES_*: the per-tenant limit tables (README "Per-tenant limits").
void read_limit_tables(const core::env_reader& env, module_settings& s) {
  auto& t = s.tables;
  t.directory = env.get_string("LIMIT_TABLES_DIR", "");
  t.max_rows = env.get_uint("LIMIT_TABLES_MAX_ROWS", t.max_rows, 1, 1'000'000'000);
  t.redis = env.get_bool("LIMIT_TABLES_REDIS", false);
  if (t.redis && s.backend_type != "redis") {
    throw core::settings_error(
        core::cat("LIMIT_TABLES_REDIS=true reads the tables from the backend's Redis: it "
                  "needs BACKEND_TYPE=redis (BACKEND_TYPE is ",
                  s.backend_type, ")"));
  }
  const auto ttl = env.get_duration("LIMIT_TABLES_REDIS_TTL", std::chrono::seconds{10});
  if (ttl < std::chrono::milliseconds{100} || ttl > std::chrono::hours{24}) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string("LIMIT_TABLES_REDIS_TTL", ""),
                  "' for LIMIT_TABLES_REDIS_TTL: expected a duration from 100ms to 24h"));
  }
  t.redis_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(ttl);
}

}  // namespace

module_settings read_module_settings(const core::env_reader& env) {
  module_settings s;
  read_rule_sources(env, s);
  s.backend_type = env.get_choice("BACKEND_TYPE", "redis", {"redis", "memcache", "memory"}, false);
  s.force_start_without_initial_config = env.get_bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false);
  s.top_descriptors_capacity =
      env.get_uint("TOP_DESCRIPTORS_CAPACITY", s.top_descriptors_capacity, 0, 16'384);
  s.top_descriptors_hash_values =
      env.get_choice("TOP_DESCRIPTORS_VALUES", "show", {"show", "hash"}, false) == "hash";
  read_limit_tables(env, s);

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
  svc.global_quota_mode = env.get_bool("QUOTA_MODE", false);
  svc.fail_open = env.get_bool("BACKEND_FAIL_OPEN", false);
  svc.response_headers_enabled = env.get_bool("LIMIT_RESPONSE_HEADERS_ENABLED", false);
  // Names are read (and checked) only when used: upstream ignores them otherwise.
  if (svc.response_headers_enabled) svc.response_headers = read_header_names(env, "LIMIT_");
  svc.request_headers_enabled = env.get_bool("LIMIT_REQUEST_HEADERS_ENABLED", false);
  if (svc.request_headers_enabled) svc.request_headers = read_header_names(env, "LIMIT_REQUEST_");
  svc.response_dynamic_metadata = env.get_bool("RESPONSE_DYNAMIC_METADATA", false);
  svc.limited_by_metadata = env.get_bool("LIMITED_BY_METADATA", false);
  svc.ietf_headers =
      env.get_choice("LIMIT_RESPONSE_HEADERS_FORMAT", "default", {"default", "ietf"}, false) == "ietf";
  if (svc.ietf_headers && !svc.response_headers_enabled) {
    s.warnings.emplace_back(
        "LIMIT_RESPONSE_HEADERS_FORMAT=ietf has no effect without LIMIT_RESPONSE_HEADERS_ENABLED=true: no "
        "rate "
        "limit response headers are sent");
  }
  svc.count_only_admitted = env.get_bool("COUNT_ONLY_ADMITTED", false);

  auto& lim = s.limiter;
  lim.near_limit_ratio = env.get_double("NEAR_LIMIT_RATIO", 0.8, 0.0, 1.0);
  lim.cache_key_prefix = env.get_string("CACHE_KEY_PREFIX", "");
  lim.expiration_jitter_max_seconds =
      static_cast<std::uint32_t>(env.get_uint("EXPIRATION_JITTER_MAX_SECONDS", 300, 0, 86'400'000));
  lim.local_cache_size_bytes = env.get_uint("LOCAL_CACHE_SIZE_IN_BYTES", 0, 0, std::uint64_t{1} << 40);
  lim.stop_cache_key_increment_when_overlimit =
      env.get_bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false);
  s.rlqs = read_rlqs_settings(env);
  return s;
}

}  // namespace sluice::ratelimit
