#include "ratelimit/settings.hpp"

#include "ratelimit/rlqs_settings.hpp"
#include "ratelimit/xds_settings.hpp"

#include "core/strings.hpp"

#include <algorithm>
#include <cctype>

namespace sluice::ratelimit {

namespace {

// (A namespace of their own: the library is built as one unit with the other settings files.)
namespace rl_env {

using core::setting;
constexpr setting config_type{
    "CONFIG_TYPE", "FILE|GRPC_XDS_SOTW|both", "FILE",
    "where rules come from: the rule files, an xDS server, or both comma-separated"};
constexpr setting backend_type{"BACKEND_TYPE", "redis|memcache|memory", "redis", "where counters live"};
constexpr setting force_start{"FORCE_START_WITHOUT_INITIAL_CONFIG", "bool", "false",
                              "start even when the rules cannot be loaded"};
constexpr setting top_capacity{"TOP_DESCRIPTORS_CAPACITY", "whole number", "256",
                               "top descriptors: counters per list, worker and 10-second slot; 0: off"};
constexpr setting top_values{"TOP_DESCRIPTORS_VALUES", "show|hash", "show",
                             "how the top descriptors show request values"};
constexpr setting tables_dir{"LIMIT_TABLES_DIR", "path", "",
                             "a folder of limit tables, <table>.csv, that rules name in limits_from"};
constexpr setting tables_max_rows{"LIMIT_TABLES_MAX_ROWS", "whole number", "10000000",
                                  "the most rows a table file may have"};
constexpr setting tables_redis{"LIMIT_TABLES_REDIS", "bool", "false",
                               "a table with no file is the Redis hash ratelimit_limits:<table>"};
constexpr setting tables_redis_ttl{"LIMIT_TABLES_REDIS_TTL", "duration", "10s",
                                   "how long a row read from Redis is used (100ms to 24h)"};
constexpr setting runtime_root{"RUNTIME_ROOT", "path", "/srv/runtime_data/current", "root of the rules tree"};
constexpr setting runtime_subdirectory{"RUNTIME_SUBDIRECTORY", "path", "", "subdirectory of the root"};
constexpr setting runtime_appdirectory{"RUNTIME_APPDIRECTORY", "path", "config",
                                       "directory of the rule files, under the root and subdirectory"};
constexpr setting runtime_ignore_dotfiles{"RUNTIME_IGNOREDOTFILES", "bool", "false",
                                          "skip files and directories whose name starts with a dot"};
constexpr setting runtime_watch_root{"RUNTIME_WATCH_ROOT", "bool", "true",
                                     "also reload when the RUNTIME_ROOT symlink is swapped"};
constexpr setting merge_domains{"MERGE_DOMAIN_CONFIG", "bool", "false",
                                "several files (and sources) may add descriptors to one domain"};
constexpr setting healthy_with_one{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "bool", "false",
                                   "unhealthy until rules with at least one domain are loaded"};
constexpr setting shadow_mode{"SHADOW_MODE", "bool", "false", "global shadow mode: the overall answer is OK"};
constexpr setting quota_mode{"QUOTA_MODE", "bool", "false", "every descriptor is a quota descriptor"};
constexpr setting fail_open{"BACKEND_FAIL_OPEN", "bool", "false",
                            "when the backend cannot count, answer OK instead of an error"};
constexpr setting response_headers{"LIMIT_RESPONSE_HEADERS_ENABLED", "bool", "false",
                                   "add RateLimit-Limit, -Remaining and -Reset to the response"};
constexpr setting limit_header{"LIMIT_LIMIT_HEADER", "header name", "RateLimit-Limit",
                               "the response header of the limit"};
constexpr setting remaining_header{"LIMIT_REMAINING_HEADER", "header name", "RateLimit-Remaining",
                                   "the response header of what is left"};
constexpr setting reset_header{"LIMIT_RESET_HEADER", "header name", "RateLimit-Reset",
                               "the response header of the seconds until the reset"};
constexpr setting request_headers{"LIMIT_REQUEST_HEADERS_ENABLED", "bool", "false",
                                  "add the same figures to the request Envoy passes upstream"};
constexpr setting request_limit_header{"LIMIT_REQUEST_LIMIT_HEADER", "header name", "RateLimit-Limit",
                                       "the request header of the limit"};
constexpr setting request_remaining_header{"LIMIT_REQUEST_REMAINING_HEADER", "header name",
                                           "RateLimit-Remaining", "the request header of what is left"};
constexpr setting request_reset_header{"LIMIT_REQUEST_RESET_HEADER", "header name", "RateLimit-Reset",
                                       "the request header of the seconds until the reset"};
constexpr setting dynamic_metadata{
    "RESPONSE_DYNAMIC_METADATA", "bool", "false",
    "fill the response's dynamic_metadata with the request and rules' metadata"};
constexpr setting limited_by{"LIMITED_BY_METADATA", "bool", "false",
                             "add limited_by to the dynamic_metadata: the descriptors over their limits"};
constexpr setting headers_format{"LIMIT_RESPONSE_HEADERS_FORMAT", "default|ietf", "default",
                                 "ietf: the IETF draft's RateLimit-Policy and RateLimit headers"};
constexpr setting count_only_admitted{"COUNT_ONLY_ADMITTED", "bool", "false",
                                      "every request is all-or-nothing: one over a limit consumes nothing"};
constexpr setting near_limit_ratio{"NEAR_LIMIT_RATIO", "number", "0.8",
                                   "hits above this share of the limit count as near_limit"};
constexpr setting cache_key_prefix{"CACHE_KEY_PREFIX", "text", "", "prepended to every counter key"};
constexpr setting expiration_jitter{"EXPIRATION_JITTER_MAX_SECONDS", "whole number", "300",
                                    "a random 0..max-1 seconds added to each counter's lifetime"};
constexpr setting local_cache{"LOCAL_CACHE_SIZE_IN_BYTES", "whole number", "0",
                              "size of the local cache of over-limit keys; 0: off"};
constexpr setting stop_increment{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "bool", "false",
                                 "a request over one limit is not counted against the others"};
constexpr setting all[]{config_type,
                        backend_type,
                        force_start,
                        runtime_root,
                        runtime_subdirectory,
                        runtime_appdirectory,
                        runtime_ignore_dotfiles,
                        runtime_watch_root,
                        merge_domains,
                        healthy_with_one,
                        shadow_mode,
                        quota_mode,
                        fail_open,
                        response_headers,
                        limit_header,
                        remaining_header,
                        reset_header,
                        request_headers,
                        request_limit_header,
                        request_remaining_header,
                        request_reset_header,
                        headers_format,
                        dynamic_metadata,
                        limited_by,
                        count_only_admitted,
                        near_limit_ratio,
                        cache_key_prefix,
                        expiration_jitter,
                        local_cache,
                        stop_increment,
                        top_capacity,
                        top_values,
                        tables_dir,
                        tables_max_rows,
                        tables_redis,
                        tables_redis_ttl};

}  // namespace rl_env

// An HTTP field name (RFC 9110 token): Envoy refuses a header it cannot send, so refuse it at start-up.
std::string header_name(const core::env_reader& env, const core::setting& name) {
  auto value = env.get_string(name);
  static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
  const bool token = !value.empty() && std::ranges::all_of(value, [](unsigned char c) {
    return std::isalnum(c) != 0 || extra.find(static_cast<char>(c)) != std::string_view::npos;
  });
  if (!token) {
    throw core::settings_error(
        core::cat("invalid value '", value, "' for ", name.name,
                  ": expected an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"));
  }
  return value;
}

service::limit_header_names read_header_names(const core::env_reader& env, const core::setting& limit,
                                              const core::setting& remaining, const core::setting& reset) {
  service::limit_header_names names;
  names.limit = header_name(env, limit);
  names.remaining = header_name(env, remaining);
  names.reset = header_name(env, reset);
  return names;
}

// CONFIG_TYPE: FILE, GRPC_XDS_SOTW, or both, comma-separated (the rules of both are served together).
void read_rule_sources(const core::env_reader& env, module_settings& s) {
  const std::string value = env.get_string(rl_env::config_type);
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

// LIMIT_TABLES_*: the per-tenant limit tables (docs/guides/tenant-tables.md).
void read_limit_tables(const core::env_reader& env, module_settings& s) {
  auto& t = s.tables;
  t.directory = env.get_string(rl_env::tables_dir);
  t.max_rows = env.get_uint(rl_env::tables_max_rows, 1, 1'000'000'000);
  t.redis = env.get_bool(rl_env::tables_redis);
  if (t.redis && s.backend_type != "redis") {
    throw core::settings_error(
        core::cat("LIMIT_TABLES_REDIS=true reads the tables from the backend's Redis: it "
                  "needs BACKEND_TYPE=redis (BACKEND_TYPE is ",
                  s.backend_type, ")"));
  }
  const auto ttl = env.get_duration(rl_env::tables_redis_ttl);
  if (ttl < std::chrono::milliseconds{100} || ttl > std::chrono::hours{24}) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string(rl_env::tables_redis_ttl),
                  "' for LIMIT_TABLES_REDIS_TTL: expected a duration from 100ms to 24h"));
  }
  t.redis_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(ttl);
}

}  // namespace

std::span<const core::setting> module_settings_list() {
  return rl_env::all;
}

const core::setting& merge_domain_config_setting() {
  return rl_env::merge_domains;
}
const core::setting& limit_tables_dir_setting() {
  return rl_env::tables_dir;
}
const core::setting& limit_tables_redis_setting() {
  return rl_env::tables_redis;
}
const core::setting& limit_tables_max_rows_setting() {
  return rl_env::tables_max_rows;
}

module_settings read_module_settings(const core::env_reader& env) {
  module_settings s;
  read_rule_sources(env, s);
  s.backend_type = env.get_choice(rl_env::backend_type, false);
  s.force_start_without_initial_config = env.get_bool(rl_env::force_start);
  s.top_descriptors_capacity = env.get_uint(rl_env::top_capacity, 0, 16'384);
  s.top_descriptors_hash_values = env.get_choice(rl_env::top_values, false) == "hash";
  read_limit_tables(env, s);

  auto& layout = s.rules.layout;
  layout.root = env.get_string(rl_env::runtime_root);
  layout.subdirectory = env.get_string(rl_env::runtime_subdirectory);
  layout.app_directory = env.get_string(rl_env::runtime_appdirectory);
  layout.ignore_dotfiles = env.get_bool(rl_env::runtime_ignore_dotfiles);
  layout.watch_root = env.get_bool(rl_env::runtime_watch_root);
  s.rules.merge_domain_config = env.get_bool(rl_env::merge_domains);
  s.rules.healthy_with_at_least_one_config_loaded = env.get_bool(rl_env::healthy_with_one);

  auto& svc = s.service;
  svc.global_shadow_mode = env.get_bool(rl_env::shadow_mode);
  svc.global_quota_mode = env.get_bool(rl_env::quota_mode);
  svc.fail_open = env.get_bool(rl_env::fail_open);
  svc.response_headers_enabled = env.get_bool(rl_env::response_headers);
  // Names are read (and checked) only when used: upstream ignores them otherwise.
  if (svc.response_headers_enabled)
    svc.response_headers =
        read_header_names(env, rl_env::limit_header, rl_env::remaining_header, rl_env::reset_header);
  svc.request_headers_enabled = env.get_bool(rl_env::request_headers);
  if (svc.request_headers_enabled)
    svc.request_headers = read_header_names(env, rl_env::request_limit_header,
                                            rl_env::request_remaining_header, rl_env::request_reset_header);
  svc.response_dynamic_metadata = env.get_bool(rl_env::dynamic_metadata);
  svc.limited_by_metadata = env.get_bool(rl_env::limited_by);
  svc.ietf_headers = env.get_choice(rl_env::headers_format, false) == "ietf";
  if (svc.ietf_headers && !svc.response_headers_enabled) {
    s.warnings.emplace_back(
        "LIMIT_RESPONSE_HEADERS_FORMAT=ietf has no effect without LIMIT_RESPONSE_HEADERS_ENABLED=true: no "
        "rate "
        "limit response headers are sent");
  }
  svc.count_only_admitted = env.get_bool(rl_env::count_only_admitted);

  auto& lim = s.limiter;
  lim.near_limit_ratio = env.get_double(rl_env::near_limit_ratio, 0.0, 1.0);
  lim.cache_key_prefix = env.get_string(rl_env::cache_key_prefix);
  lim.expiration_jitter_max_seconds =
      static_cast<std::uint32_t>(env.get_uint(rl_env::expiration_jitter, 0, 86'400'000));
  lim.local_cache_size_bytes = env.get_uint(rl_env::local_cache, 0, std::uint64_t{1} << 40);
  lim.stop_cache_key_increment_when_overlimit = env.get_bool(rl_env::stop_increment);
  s.rlqs = read_rlqs_settings(env);
  return s;
}

}  // namespace sluice::ratelimit
