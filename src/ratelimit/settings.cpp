#include "ratelimit/settings.hpp"

#include "ratelimit/rlqs_settings.hpp"
#include "ratelimit/xds_settings.hpp"

#include "core/strings.hpp"
#include "memcache/srv_lookup.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

namespace sluice::ratelimit {

namespace {

std::chrono::milliseconds to_ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

// "password" or "user:password" (split at the first ':'), as upstream's REDIS_AUTH.
void split_auth(const std::string& auth, std::string& username, std::string& password) {
  if (auto colon = auth.find(':'); colon != std::string::npos) {
    username = auth.substr(0, colon);
    password = auth.substr(colon + 1);
  } else {
    password = auth;
  }
}

// `<name>_FILE` (a secret that rotates: redis/credentials.hpp) in place of `<name>`, never with it.
std::shared_ptr<redis::credential_file> read_auth_file(const core::env_reader& env, const std::string& name) {
  const auto path = env.get_string(name + "_FILE", "");
  if (path.empty()) return nullptr;
  if (!env.get_string(name, "").empty())
    throw core::settings_error(core::cat(name, " and ", name, "_FILE are exclusive: set one of them"));
  try {
    return std::make_shared<redis::credential_file>(path, name + "_FILE");
  } catch (const std::runtime_error& e) {
    throw core::settings_error(core::cat(name, "_FILE: ", e.what()));
  }
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= list.size()) {
    auto comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) parts.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

// "redis://[user[:password]@]host:port[/db]" (and rediss:// for TLS), which upstream's client also accepts.
struct redis_url {
  std::string address, userinfo;
  bool tls = false;
};
std::optional<redis_url> parse_redis_url(std::string_view text) {
  redis_url u;
  if (text.starts_with("redis://")) {
    text.remove_prefix(8);
  } else if (text.starts_with("rediss://")) {
    text.remove_prefix(9);
    u.tls = true;
  } else {
    return std::nullopt;
  }
  if (auto at = text.rfind('@'); at != std::string_view::npos) {
    u.userinfo = text.substr(0, at);
    text.remove_prefix(at + 1);
  }
  u.address = text.substr(0, text.find('/'));
  return u;
}

// upstream's MaskCredentialsInUrl: what an error message may show of a URL list.
// Upstream's pool may grow (CREATE) or fail (ERROR) when every connection is busy, and refuses to start with
// either; Sluice's pipelined connections never run out, so a request always waits its turn. WAIT, and, as
// upstream, any value it does not know, is accepted.
void check_pool_on_empty(const core::env_reader& env, const std::string& prefix) {
  const auto name = prefix + "POOL_ON_EMPTY_BEHAVIOR";
  const auto value = env.get_string(name, "WAIT");
  std::string upper = value;
  std::ranges::transform(upper, upper.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "CREATE" || upper == "ERROR") {
    throw core::settings_error(
        core::cat("invalid value '", value, "' for ", name,
                  ": only WAIT is supported (Redis connections are pipelined and never "
                  "run out: a request waits for its turn)"));
  }
}

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

std::string masked(std::string_view urls) {
  std::string out;
  for (const auto& part : split_list(std::string(urls))) {
    if (!out.empty()) out += ',';
    const auto at = part.rfind('@');
    out += part.starts_with("redis") && at != std::string::npos
               ? core::cat(part.substr(0, part.find("://") + 3), "*****@", part.substr(at + 1))
               : part;
  }
  return out;
}

// "host:port" with a non-empty host and a port number.
bool is_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
  return std::ranges::all_of(text.substr(colon + 1), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// The client TLS files of `prefix`: set together (certificate and key) and existing.
core::tls_client_config read_tls_files(const core::env_reader& env, const std::string& prefix, bool enabled) {
  core::tls_client_config tls;
  tls.enabled = enabled;
  tls.ca_file = env.get_string(prefix + "CACERT", "");
  tls.cert_file = env.get_string(prefix + "CLIENT_CERT", "");
  tls.key_file = env.get_string(prefix + "CLIENT_KEY", "");
  tls.skip_hostname_verification = env.get_bool(prefix + "SKIP_HOSTNAME_VERIFICATION", false);
  if (!enabled) return tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    throw core::settings_error(
        core::cat(prefix, "CLIENT_CERT and ", prefix, "CLIENT_KEY must be set together"));
  }
  for (auto [name, file] :
       {std::pair{"CACERT", &tls.ca_file}, {"CLIENT_CERT", &tls.cert_file}, {"CLIENT_KEY", &tls.key_file}}) {
    if (!file->empty() && !std::filesystem::is_regular_file(*file)) {
      throw core::settings_error(
          core::cat("invalid value '", *file, "' for ", prefix, name, ": no such file"));
    }
  }
  return tls;
}

// REDIS_<...> or REDIS_PERSECOND_<...>: upstream's names and defaults (reference §1.7).
redis_store_settings read_redis_store(const core::env_reader& env, const std::string& prefix,
                                      std::string_view default_url) {
  redis_store_settings s;
  auto& c = s.connection;
  auto type = env.get_choice(prefix + "TYPE", "single", {"single", "sentinel", "cluster"}, true);
  auto socket_type = env.get_choice(prefix + "SOCKET_TYPE", "unix", {"tcp", "unix"}, true);
  c.unix_socket =
      socket_type == "unix" && type == "single";  // sentinels, masters and clusters are always TCP
  // URLs are reduced to host:port here, so no credential in them reaches a log line or an error message.
  const std::string raw_url = env.get_string(prefix + "URL", default_url);
  std::string url_auth;
  bool url_tls = false;
  c.address.clear();
  for (const auto& entry : split_list(raw_url)) {
    if (!c.address.empty()) c.address += ',';
    auto url = parse_redis_url(entry);
    c.address += url ? url->address : entry;
    if (url && type == "single") {
      url_auth = url->userinfo;
      url_tls = url->tls;
    }
  }
  if (type == "sentinel") {
    auto parts = split_list(c.address);
    if (parts.size() < 2) {
      throw core::settings_error(
          core::cat("invalid value '", masked(raw_url), "' for ", prefix,
                    "URL: Expected master name and a list of urls for the sentinels, in the "
                    "format: <redis master name>,<sentinel1>,...,<sentineln>"));
    }
    auto& sentinel = c.sentinel.emplace();
    sentinel.master_name = parts.front();
    sentinel.sentinels.assign(parts.begin() + 1, parts.end());
    split_auth(env.get_string(prefix + "SENTINEL_AUTH", ""), sentinel.username, sentinel.password);
    sentinel.auth_file = read_auth_file(env, prefix + "SENTINEL_AUTH");
  } else if (type == "cluster") {
    s.cluster_seeds = split_list(c.address);
    if (s.cluster_seeds.empty() || std::ranges::any_of(s.cluster_seeds, [](const auto& n) {
          return n.rfind(':') == std::string::npos;
        })) {
      throw core::settings_error(core::cat("invalid value '", masked(raw_url), "' for ", prefix,
                                           "URL: expected host:port,host:port,... (the cluster's nodes)"));
    }
  } else if (!c.unix_socket && c.address.rfind(':') == std::string::npos) {
    throw core::settings_error(core::cat("invalid value '", masked(raw_url), "' for ", prefix,
                                         "URL: expected host:port (", prefix, "SOCKET_TYPE is tcp)"));
  }
  s.pool_size = env.get_uint(prefix + "POOL_SIZE", s.pool_size, 1, 1024);
  // REDIS_AUTH wins over credentials in the URL.
  split_auth(env.get_string(prefix + "AUTH", url_auth), c.username, c.password);
  c.auth_file = read_auth_file(env, prefix + "AUTH");
  // The TLS files are shared by both stores, as upstream's REDIS_TLS_* are.
  c.tls = read_tls_files(env, "REDIS_TLS_", env.get_bool(prefix + "TLS", url_tls));
  if (c.tls.enabled && c.unix_socket) {
    throw core::settings_error(core::cat(prefix, "TLS=true needs ", prefix, "SOCKET_TYPE=tcp"));
  }
  c.write_window = std::chrono::duration_cast<std::chrono::microseconds>(
      env.get_duration(prefix + "PIPELINE_WINDOW", std::chrono::nanoseconds{0}));
  c.write_limit = env.get_uint(prefix + "PIPELINE_LIMIT", 0, 0, 1'000'000);
  // Accepted and checked (upstream panics below 0); a cluster always sends the keys of different nodes in
  // parallel, as upstream's 0 does (see README).
  env.get_uint(prefix + "CLUSTER_PIPELINE_PARALLELISM", 1, 0, 1'000'000);
  check_pool_on_empty(env, prefix);
  c.connect_timeout = to_ms(env.get_duration(prefix + "TIMEOUT", std::chrono::seconds{10}));
  c.request_timeout = to_ms(env.get_duration("REDIS_OP_TIMEOUT", std::chrono::milliseconds{250}));
  if (c.request_timeout.count() <= 0) {
    throw core::settings_error(core::cat("invalid value '", env.get_string("REDIS_OP_TIMEOUT", ""),
                                         "' for REDIS_OP_TIMEOUT: expected a duration of at least 1ms"));
  }
  return s;
}

redis_settings read_redis(const core::env_reader& env) {
  redis_settings r;
  r.main = read_redis_store(env, "REDIS_", "/var/run/nutcracker/ratelimit.sock");
  if (env.get_bool("REDIS_PERSECOND", false)) {
    r.per_second = read_redis_store(env, "REDIS_PERSECOND_", "/var/run/nutcracker/ratelimitpersecond.sock");
  }
  r.health_check_active_connection = env.get_bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false);
  r.startup_max_elapsed =
      to_ms(env.get_duration("REDIS_STARTUP_MAX_ELAPSED_TIME", std::chrono::nanoseconds{0}));
  // Upstream's backoff until the first connection; after one is lost, Sluice's own short one (see README).
  auto startup_min = to_ms(env.get_duration("REDIS_STARTUP_INITIAL_INTERVAL", std::chrono::seconds{1}));
  auto startup_max = to_ms(env.get_duration("REDIS_STARTUP_MAX_INTERVAL", std::chrono::seconds{30}));
  if (startup_min.count() <= 0)
    throw core::settings_error(core::cat("invalid value '",
                                         env.get_string("REDIS_STARTUP_INITIAL_INTERVAL", ""),
                                         "' for REDIS_STARTUP_INITIAL_INTERVAL: expected at least 1ms"));
  startup_max = std::max(startup_max, startup_min);
  const auto sync = env.get_duration("REDIS_SYNC_INTERVAL", std::chrono::nanoseconds{0});
  if (sync.count() > 0 && (sync < std::chrono::milliseconds{1} || sync > std::chrono::seconds{10})) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string("REDIS_SYNC_INTERVAL", ""),
                  "' for REDIS_SYNC_INTERVAL: expected 0 or a duration from 1ms to 10s "
                  "(the overshoot grows with it; see README)"));
  }
  r.sync_interval = to_ms(sync);
  r.sync_max_keys = env.get_uint("REDIS_SYNC_MAX_KEYS", r.sync_max_keys, 1024, 1'000'000'000);
  for (auto* store : {&r.main, r.per_second ? &*r.per_second : nullptr}) {
    if (store == nullptr) continue;
    store->connection.startup_min = startup_min;
    store->connection.startup_max = startup_max;
  }
  return r;
}

memcache_settings read_memcache(const core::env_reader& env) {
  memcache_settings m;
  const auto host_port = env.get_string("MEMCACHE_HOST_PORT", "");
  m.host_port = split_list(host_port);
  m.srv = env.get_string("MEMCACHE_SRV", "");
  if (!m.srv.empty() && !m.host_port.empty()) {
    throw core::settings_error("Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set");
  }
  if (m.srv.empty() && m.host_port.empty()) {
    throw core::settings_error(
        "BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT (host:port,...) or MEMCACHE_SRV (an SRV record "
        "name)");
  }
  for (const auto& node : m.host_port) {
    if (!is_host_port(node)) {
      throw core::settings_error(
          core::cat("invalid value '", host_port, "' for MEMCACHE_HOST_PORT: '", node, "' is not host:port"));
    }
  }
  m.srv_refresh = to_ms(env.get_duration("MEMCACHE_SRV_REFRESH", std::chrono::nanoseconds{0}));
  m.srv_dns_server = env.get_string("MEMCACHE_SRV_DNS_SERVER", "");
  if (!m.srv_dns_server.empty() && !memcache::valid_dns_server(m.srv_dns_server)) {
    throw core::settings_error(
        core::cat("invalid value '", m.srv_dns_server,
                  "' for MEMCACHE_SRV_DNS_SERVER: expected an IPv4 address, with a port or not"));
  }
  // gomemcache takes 0 for its default, 2.
  m.max_idle_conns = env.get_uint("MEMCACHE_MAX_IDLE_CONNS", 2, 0, 1024);
  if (m.max_idle_conns == 0) m.max_idle_conns = 2;
  m.tls = read_tls_files(env, "MEMCACHE_TLS_", env.get_bool("MEMCACHE_TLS", false));
  return m;
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
  s.redis.limit_tables = t.redis;
}

}  // namespace

module_settings read_module_settings(const core::env_reader& env) {
  module_settings s;
  read_rule_sources(env, s);
  s.backend_type = env.get_choice("BACKEND_TYPE", "redis", {"redis", "memcache", "memory"}, false);
  s.force_start_without_initial_config = env.get_bool("FORCE_START_WITHOUT_INITIAL_CONFIG", false);
  s.memory_max_counters = env.get_uint("MEMORY_MAX_COUNTERS", s.memory_max_counters, 1024, 1'000'000'000);
  s.memory_snapshot_file = env.get_string("MEMORY_SNAPSHOT_FILE", "");
  const auto snapshot_interval = env.get_duration("MEMORY_SNAPSHOT_INTERVAL", std::chrono::nanoseconds{0});
  if (snapshot_interval.count() > 0 &&
      (snapshot_interval < std::chrono::milliseconds{100} || snapshot_interval > std::chrono::hours{24})) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string("MEMORY_SNAPSHOT_INTERVAL", ""),
                  "' for MEMORY_SNAPSHOT_INTERVAL: expected 0 or a duration from 100ms to 24h"));
  }
  s.memory_snapshot_interval = std::chrono::duration_cast<std::chrono::milliseconds>(snapshot_interval);
  if (s.backend_type != "memory" && !s.memory_snapshot_file.empty()) {
    throw core::settings_error(
        core::cat("MEMORY_SNAPSHOT_FILE applies to BACKEND_TYPE=memory only (BACKEND_TYPE is ",
                  s.backend_type, "): unset it"));
  }
  if (s.memory_snapshot_file.empty() && snapshot_interval.count() > 0)
    throw core::settings_error(
        "MEMORY_SNAPSHOT_INTERVAL needs MEMORY_SNAPSHOT_FILE: set the file, or unset it");
  s.top_descriptors_capacity =
      env.get_uint("TOP_DESCRIPTORS_CAPACITY", s.top_descriptors_capacity, 0, 16'384);
  s.top_descriptors_hash_values =
      env.get_choice("TOP_DESCRIPTORS_VALUES", "show", {"show", "hash"}, false) == "hash";
  if (s.backend_type == "redis") s.redis = read_redis(env);
  if (s.backend_type == "memcache") s.memcache = read_memcache(env);
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
  if (svc.count_only_admitted && s.backend_type == "memcache") {
    throw core::settings_error(
        "COUNT_ONLY_ADMITTED=true is not offered with BACKEND_TYPE=memcache: memcached cannot check and "
        "change several counters in one step (use redis or memory)");
  }
  if (s.backend_type != "redis" && env.get_duration("REDIS_SYNC_INTERVAL", {}).count() > 0) {
    throw core::settings_error(
        core::cat("REDIS_SYNC_INTERVAL applies to BACKEND_TYPE=redis only (BACKEND_TYPE is ", s.backend_type,
                  "): unset it"));
  }
  if (svc.count_only_admitted && s.redis.sync_interval.count() > 0) {
    throw core::settings_error(
        "COUNT_ONLY_ADMITTED=true cannot be combined with REDIS_SYNC_INTERVAL: a request counted only when "
        "every limit admits needs each counter checked and changed in Redis in one step, which batching "
        "gives "
        "up (unset one of them)");
  }

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
