#include "ratelimit/backends/redis/settings.hpp"

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "core/tls_client.hpp"
#include "redis/credentials.hpp"

namespace sluice::ratelimit::backends::redis {

namespace {

using core::setting;
// REDIS_<...>, and as REDIS_PERSECOND_<...> for the per-second store.
constexpr setting store_settings[]{
    {"REDIS_TYPE", "single|sentinel|cluster", "single", "the Redis deployment (any case)"},
    {"REDIS_SOCKET_TYPE", "tcp|unix", "unix", "how REDIS_URL is reached"},
    {"REDIS_URL", "text", "/var/run/nutcracker/ratelimit.sock",
     "single: host:port, a socket path or redis[s]://[user:password@]host:port[/db]; sentinel: master name, "
     "then sentinels; cluster: nodes"},
    {"REDIS_POOL_SIZE", "whole number", "10", "pipelined connections (per node on a cluster)"},
    {"REDIS_AUTH", "text", "", "password, or user:password for an ACL user"},
    {"REDIS_AUTH_FILE", "path", "", "a file holding REDIS_AUTH's value, for a secret that rotates"},
    {"REDIS_SENTINEL_AUTH", "text", "", "password or user:password for the sentinels"},
    {"REDIS_SENTINEL_AUTH_FILE", "path", "", "a file holding REDIS_SENTINEL_AUTH's value"},
    {"REDIS_TLS", "bool", "(false; true for a rediss:// URL)",
     "connect with TLS (needs REDIS_SOCKET_TYPE=tcp)"},
    {"REDIS_PIPELINE_WINDOW", "duration", "0", "wait this long before each write to gather commands"},
    {"REDIS_PIPELINE_LIMIT", "whole number", "0", "at most this many requests per write; 0: no limit"},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", "whole number", "1", "accepted and checked, no effect"},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "text", "WAIT",
     "accepted and checked (CREATE and ERROR refused), no effect"},
    {"REDIS_TIMEOUT", "duration", "10s", "connect timeout (TCP connect, AUTH and PING)"},
};
constexpr setting op_timeout{"REDIS_OP_TIMEOUT", "duration", "250ms",
                             "a decision whose Redis reply takes longer fails with UNAVAILABLE / 503"};
constexpr setting use_per_second{
    "REDIS_PERSECOND", "bool", "false",
    "send the counters of per-second limits to a second Redis (REDIS_PERSECOND_*)"};
constexpr setting health_check_active{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "bool", "false",
                                      "healthy only while a connection to each Redis is up"};
constexpr setting startup_max_elapsed{"REDIS_STARTUP_MAX_ELAPSED_TIME", "duration", "0",
                                      "exit 1 when no connection is made within this time; 0: wait forever"};
constexpr setting startup_initial{"REDIS_STARTUP_INITIAL_INTERVAL", "duration", "1s",
                                  "the first wait between connection attempts at start-up"};
constexpr setting startup_max_interval{"REDIS_STARTUP_MAX_INTERVAL", "duration", "30s",
                                       "the longest wait between connection attempts at start-up"};
constexpr setting sync_interval_setting{
    "REDIS_SYNC_INTERVAL", "duration", "0",
    "batched counting: each worker decides locally and sends its hits this often "
    "(1ms to 10s); 0: every hit with its decision"};
constexpr setting sync_max_keys_setting{
    "REDIS_SYNC_MAX_KEYS", "whole number", "1000000",
    "with REDIS_SYNC_INTERVAL: the most counters an instance holds locally"};
constexpr setting tls_files[]{
    {"REDIS_TLS_CACERT", "path", "", "CA file that signs the server's certificate; empty: the system's CAs"},
    {"REDIS_TLS_CLIENT_CERT", "path", "", "client certificate for mutual TLS, with REDIS_TLS_CLIENT_KEY"},
    {"REDIS_TLS_CLIENT_KEY", "path", "", "the client certificate's key"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "bool", "false",
     "verify the certificate chain but not the name"},
};
constexpr setting other_settings[]{
    op_timeout,      use_per_second,       health_check_active,   startup_max_elapsed,
    startup_initial, startup_max_interval, sync_interval_setting, sync_max_keys_setting};

const core::setting_family& stores() {
  static const core::setting_family family(
      store_settings, "REDIS_",
      {{"REDIS_PERSECOND_", "per-second store: ", {{"URL", "/var/run/nutcracker/ratelimitpersecond.sock"}}}});
  return family;
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
std::shared_ptr<sluice::redis::credential_file> read_auth_file(const core::env_reader& env,
                                                               const std::string& prefix,
                                                               const std::string& name) {
  const auto& file = stores().at(prefix, name + "_FILE");
  const auto path = env.get_string(file);
  if (path.empty()) return nullptr;
  if (!env.get_string(stores().at(prefix, name)).empty())
    throw core::settings_error(
        core::cat(prefix, name, " and ", file.name, " are exclusive: set one of them"));
  try {
    return std::make_shared<sluice::redis::credential_file>(path, std::string(file.name));
  } catch (const std::runtime_error& e) {
    throw core::settings_error(core::cat(file.name, ": ", e.what()));
  }
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
std::string masked(std::string_view urls) {
  std::string out;
  for (const auto& part : core::split_list(std::string(urls))) {
    if (!out.empty()) out += ',';
    const auto at = part.rfind('@');
    out += part.starts_with("redis") && at != std::string::npos
               ? core::cat(part.substr(0, part.find("://") + 3), "*****@", part.substr(at + 1))
               : part;
  }
  return out;
}

// Upstream's pool may grow (CREATE) or fail (ERROR) when every connection is busy, and refuses to start with
// either; Sluice's pipelined connections never run out, so a request always waits its turn. WAIT, and, as
// upstream, any value it does not know, is accepted.
void check_pool_on_empty(const core::env_reader& env, const std::string& prefix) {
  const auto& declared = stores().at(prefix, "POOL_ON_EMPTY_BEHAVIOR");
  const auto value = env.get_string(declared);
  std::string upper = value;
  std::ranges::transform(upper, upper.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "CREATE" || upper == "ERROR") {
    throw core::settings_error(
        core::cat("invalid value '", value, "' for ", declared.name,
                  ": only WAIT is supported (Redis connections are pipelined and never "
                  "run out: a request waits for its turn)"));
  }
}

// REDIS_<...> or REDIS_PERSECOND_<...>: upstream's names and defaults (reference §1.7).
redis_store_settings read_redis_store(const core::env_reader& env, const std::string& prefix) {
  redis_store_settings s;
  auto& c = s.connection;
  const auto at = [&prefix](std::string_view suffix) -> const setting& {
    return stores().at(prefix, suffix);
  };
  auto type = env.get_choice(at("TYPE"), true);
  auto socket_type = env.get_choice(at("SOCKET_TYPE"), true);
  c.unix_socket =
      socket_type == "unix" && type == "single";  // sentinels, masters and clusters are always TCP
  // URLs are reduced to host:port here, so no credential in them reaches a log line or an error message.
  const std::string raw_url = env.get_string(at("URL"));
  std::string url_auth;
  bool url_tls = false;
  c.address.clear();
  for (const auto& entry : core::split_list(raw_url)) {
    if (!c.address.empty()) c.address += ',';
    auto url = parse_redis_url(entry);
    c.address += url ? url->address : entry;
    if (url && type == "single") {
      url_auth = url->userinfo;
      url_tls = url->tls;
    }
  }
  if (type == "sentinel") {
    auto parts = core::split_list(c.address);
    if (parts.size() < 2) {
      throw core::settings_error(
          core::cat("invalid value '", masked(raw_url), "' for ", prefix,
                    "URL: Expected master name and a list of urls for the sentinels, in the "
                    "format: <redis master name>,<sentinel1>,...,<sentineln>"));
    }
    auto& sentinel = c.sentinel.emplace();
    sentinel.master_name = parts.front();
    sentinel.sentinels.assign(parts.begin() + 1, parts.end());
    split_auth(env.get_string(at("SENTINEL_AUTH")), sentinel.username, sentinel.password);
    sentinel.auth_file = read_auth_file(env, prefix, "SENTINEL_AUTH");
  } else if (type == "cluster") {
    s.cluster_seeds = core::split_list(c.address);
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
  s.pool_size = env.get_uint(at("POOL_SIZE"), 1, 1024);
  // REDIS_AUTH wins over credentials in the URL.
  auto auth = env.get_string(at("AUTH"));
  split_auth(auth.empty() ? url_auth : auth, c.username, c.password);
  c.auth_file = read_auth_file(env, prefix, "AUTH");
  // The TLS files are shared by both stores, as upstream's REDIS_TLS_* are.
  c.tls = core::read_tls_client_files(env, {tls_files[0], tls_files[1], tls_files[2], tls_files[3]},
                                      env.get_bool(at("TLS"), url_tls));
  if (c.tls.enabled && c.unix_socket) {
    throw core::settings_error(core::cat(prefix, "TLS=true needs ", prefix, "SOCKET_TYPE=tcp"));
  }
  c.write_window =
      std::chrono::duration_cast<std::chrono::microseconds>(env.get_duration(at("PIPELINE_WINDOW")));
  c.write_limit = env.get_uint(at("PIPELINE_LIMIT"), 0, 1'000'000);
  // Accepted and checked (upstream panics below 0); a cluster always sends the keys of different nodes in
  // parallel, as upstream's 0 does (see docs/concepts/backends.md#redis-backend).
  env.get_uint(at("CLUSTER_PIPELINE_PARALLELISM"), 0, 1'000'000);
  check_pool_on_empty(env, prefix);
  c.connect_timeout = core::to_ms(env.get_duration(at("TIMEOUT")));
  c.request_timeout = core::to_ms(env.get_duration(op_timeout));
  if (c.request_timeout.count() <= 0) {
    throw core::settings_error(core::cat("invalid value '", env.get_string(op_timeout),
                                         "' for REDIS_OP_TIMEOUT: expected a duration of at least 1ms"));
  }
  return s;
}

}  // namespace

std::vector<core::setting> redis_backend_settings() {
  std::vector<core::setting> out(stores().all().begin(), stores().all().end());
  out.insert(out.end(), std::begin(other_settings), std::end(other_settings));
  out.insert(out.end(), std::begin(tls_files), std::end(tls_files));
  return out;
}

redis_settings read_redis_settings(const core::env_reader& env, bool limit_tables, bool count_only_admitted) {
  redis_settings r;
  r.main = read_redis_store(env, "REDIS_");
  if (env.get_bool(use_per_second)) {
    r.per_second = read_redis_store(env, "REDIS_PERSECOND_");
  }
  r.health_check_active_connection = env.get_bool(health_check_active);
  r.startup_max_elapsed = core::to_ms(env.get_duration(startup_max_elapsed));
  // Upstream's backoff until the first connection; after one is lost, Sluice's own short one (see
  // docs/concepts/backends.md#redis-backend).
  auto startup_min = core::to_ms(env.get_duration(startup_initial));
  auto startup_max = core::to_ms(env.get_duration(startup_max_interval));
  if (startup_min.count() <= 0)
    throw core::settings_error(core::cat("invalid value '", env.get_string(startup_initial),
                                         "' for REDIS_STARTUP_INITIAL_INTERVAL: expected at least 1ms"));
  startup_max = std::max(startup_max, startup_min);
  const auto sync = env.get_duration(sync_interval_setting);
  if (sync.count() > 0 && (sync < std::chrono::milliseconds{1} || sync > std::chrono::seconds{10})) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string(sync_interval_setting),
                  "' for REDIS_SYNC_INTERVAL: expected 0 or a duration from 1ms to 10s "
                  "(the overshoot grows with it; see docs/concepts/batched-counting.md)"));
  }
  r.sync_interval = core::to_ms(sync);
  r.sync_max_keys = env.get_uint(sync_max_keys_setting, 1024, 1'000'000'000);
  for (auto* store : {&r.main, r.per_second ? &*r.per_second : nullptr}) {
    if (store == nullptr) continue;
    store->connection.startup_min = startup_min;
    store->connection.startup_max = startup_max;
  }
  r.limit_tables = limit_tables;
  r.regions = read_region_settings(env, r.main.connection, !r.main.cluster_seeds.empty());
  if (count_only_admitted && r.sync_interval.count() > 0) {
    throw core::settings_error(
        "COUNT_ONLY_ADMITTED=true cannot be combined with REDIS_SYNC_INTERVAL: a request counted only when "
        "every limit admits needs each counter checked and changed in Redis in one step, which batching "
        "gives up (unset one of them)");
  }
  return r;
}

void refuse_redis_settings(const core::env_reader& env, std::string_view backend_type) {
  if (const auto& region = region_backend_settings().front(); !env.get_string(region).empty()) {
    throw core::settings_error(core::cat(region.name, " applies to BACKEND_TYPE=redis only (BACKEND_TYPE is ",
                                         backend_type, "): regions share their counters through Redis"));
  }
  if (env.get_duration(sync_interval_setting).count() > 0) {
    throw core::settings_error(
        core::cat("REDIS_SYNC_INTERVAL applies to BACKEND_TYPE=redis only (BACKEND_TYPE is ", backend_type,
                  "): unset it"));
  }
}

}  // namespace sluice::ratelimit::backends::redis
