#include <doctest/doctest.h>

#include "app/backend_choice.hpp"
#include "ratelimit/settings.hpp"

using namespace sluice;

namespace {

// The module's settings and the chosen backend's, read as the server reads them.
struct read_settings : ratelimit::module_settings {
  backend_settings backend;
  const auto& redis() const { return std::get<ratelimit::backends::redis::redis_settings>(backend); }
  const auto& memcache() const { return std::get<ratelimit::backends::memcache::memcache_settings>(backend); }
  const auto& memory() const { return std::get<ratelimit::backends::memory::memory_settings>(backend); }
};

read_settings read_everything(const core::env_reader& env) {
  read_settings s{ratelimit::read_module_settings(env), {}};
  s.backend = read_backend_settings(env, s);
  return s;
}

}  // namespace

TEST_CASE("rate limit settings: upstream's defaults") {
  auto s = read_everything(core::env_reader(std::map<std::string, std::string>{}));
  CHECK(s.backend_type == "redis");
  CHECK_FALSE(s.force_start_without_initial_config);
  CHECK(s.rules.layout.root == "/srv/runtime_data/current");
  CHECK(s.rules.layout.subdirectory.empty());
  CHECK(s.rules.layout.app_directory == "config");
  CHECK(s.rules.layout.watch_root);
  CHECK_FALSE(s.rules.layout.ignore_dotfiles);
  CHECK_FALSE(s.rules.merge_domain_config);
  CHECK_FALSE(s.rules.healthy_with_at_least_one_config_loaded);
  CHECK_FALSE(s.service.global_shadow_mode);
  CHECK_FALSE(s.service.response_headers_enabled);
  CHECK_FALSE(s.service.global_quota_mode);
  CHECK_FALSE(s.service.response_dynamic_metadata);
  CHECK_FALSE(s.service.request_headers_enabled);
  CHECK(s.service.request_headers.limit == "RateLimit-Limit");
  CHECK(s.service.request_headers.remaining == "RateLimit-Remaining");
  CHECK(s.service.request_headers.reset == "RateLimit-Reset");
  CHECK(s.service.response_headers.limit == "RateLimit-Limit");
  CHECK(s.service.response_headers.remaining == "RateLimit-Remaining");
  CHECK(s.service.response_headers.reset == "RateLimit-Reset");
  CHECK(s.limiter.near_limit_ratio == doctest::Approx(0.8));
  CHECK(s.limiter.cache_key_prefix.empty());
  CHECK(s.limiter.expiration_jitter_max_seconds == 300);
  CHECK(s.limiter.local_cache_size_bytes == 0);
  CHECK_FALSE(s.limiter.stop_cache_key_increment_when_overlimit);
  CHECK(s.redis().main.connection.startup_min == std::chrono::seconds(1));
  CHECK(s.redis().main.connection.startup_max == std::chrono::seconds(30));
  CHECK(s.redis().main.connection.reconnect_min == std::chrono::milliseconds(50));
}

TEST_CASE(
    "rate limit settings: REDIS_STARTUP_* intervals apply to both stores, before the first connection") {
  auto s = read_everything(
      core::env_reader(std::map<std::string, std::string>{{"REDIS_STARTUP_INITIAL_INTERVAL", "200ms"},
                                                          {"REDIS_STARTUP_MAX_INTERVAL", "5s"},
                                                          {"REDIS_PERSECOND", "true"},
                                                          {"REDIS_PERSECOND_URL", "127.0.0.1:6380"},
                                                          {"REDIS_PERSECOND_SOCKET_TYPE", "tcp"}}));
  CHECK(s.redis().main.connection.startup_min == std::chrono::milliseconds(200));
  CHECK(s.redis().main.connection.startup_max == std::chrono::seconds(5));
  REQUIRE(s.redis().per_second);
  CHECK(s.redis().per_second->connection.startup_min == std::chrono::milliseconds(200));
  CHECK(s.redis().per_second->connection.startup_max == std::chrono::seconds(5));
  auto small_max = read_everything(core::env_reader(
      std::map<std::string, std::string>{{"REDIS_STARTUP_MAX_INTERVAL", "100ms"}}));  // below the initial 1s
  CHECK(small_max.redis().main.connection.startup_max == std::chrono::seconds(1));
  CHECK_THROWS_WITH_AS(
      read_everything(
          core::env_reader(std::map<std::string, std::string>{{"REDIS_STARTUP_INITIAL_INTERVAL", "0"}})),
      "invalid value '0' for REDIS_STARTUP_INITIAL_INTERVAL: expected at least 1ms", core::settings_error);
}

TEST_CASE("rate limit settings: values are read, bad ones name the variable") {
  auto s = read_everything(core::env_reader({{"BACKEND_TYPE", "memory"},
                                             {"RUNTIME_ROOT", "/etc/rl"},
                                             {"RUNTIME_SUBDIRECTORY", "sub"},
                                             {"RUNTIME_WATCH_ROOT", "false"},
                                             {"SHADOW_MODE", "1"},
                                             {"LIMIT_RESET_HEADER", "X-Reset"},
                                             {"LIMIT_RESPONSE_HEADERS_ENABLED", "true"},
                                             {"NEAR_LIMIT_RATIO", "0.5"},
                                             {"CACHE_KEY_PREFIX", "p:"},
                                             {"EXPIRATION_JITTER_MAX_SECONDS", "0"},
                                             {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576"},
                                             {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"},
                                             {"MEMORY_MAX_COUNTERS", "5000"}}));
  CHECK(s.backend_type == "memory");
  CHECK(s.rules.layout.rules_directory() == "/etc/rl/sub/config");
  CHECK(s.rules.layout.name_prefix().empty());
  CHECK(s.service.global_shadow_mode);
  CHECK(s.service.response_headers.reset == "X-Reset");
  CHECK(s.limiter.near_limit_ratio == doctest::Approx(0.5));
  CHECK(s.limiter.cache_key_prefix == "p:");
  CHECK(s.limiter.expiration_jitter_max_seconds == 0);
  CHECK(s.limiter.local_cache_size_bytes == 1048576);
  CHECK(s.limiter.stop_cache_key_increment_when_overlimit);
  CHECK(s.memory().max_counters == 5000);

  auto fails = [](std::string name, std::string value) {
    return read_everything(
        core::env_reader(std::map<std::string, std::string>{{std::move(name), std::move(value)}}));
  };
  CHECK_THROWS_WITH_AS(fails("BACKEND_TYPE", "mysql"),
                       "invalid value 'mysql' for BACKEND_TYPE: expected one of redis, memcache, memory",
                       core::settings_error);
  CHECK_THROWS_WITH_AS(
      fails("CONFIG_TYPE", "XDS"),
      "invalid value 'XDS' for CONFIG_TYPE: expected FILE, GRPC_XDS_SOTW, or both comma-separated",
      core::settings_error);
  CHECK_THROWS_WITH_AS(fails("NEAR_LIMIT_RATIO", "1.5"),
                       "invalid value '1.5' for NEAR_LIMIT_RATIO: expected a number from 0 to 1",
                       core::settings_error);
  CHECK_THROWS_AS(fails("MERGE_DOMAIN_CONFIG", "yes"), core::settings_error);
  CHECK_THROWS_WITH_AS(
      fails("REDIS_CLUSTER_PIPELINE_PARALLELISM", "-1"),
      "invalid value '-1' for REDIS_CLUSTER_PIPELINE_PARALLELISM: expected a whole number from 0 to 1000000",
      core::settings_error);
  CHECK_NOTHROW(fails("REDIS_CLUSTER_PIPELINE_PARALLELISM", "0"));
  CHECK(fails("TOP_DESCRIPTORS_CAPACITY", "0").top_descriptors_capacity == 0);  // off
  CHECK(fails("TOP_DESCRIPTORS_CAPACITY", "16384").top_descriptors_capacity == 16384);
  CHECK(s.top_descriptors_capacity == 256);
  CHECK_FALSE(s.top_descriptors_hash_values);
  CHECK(fails("TOP_DESCRIPTORS_VALUES", "hash").top_descriptors_hash_values);
  CHECK_FALSE(fails("TOP_DESCRIPTORS_VALUES", "show").top_descriptors_hash_values);
  CHECK_THROWS_WITH_AS(fails("TOP_DESCRIPTORS_VALUES", "mask"),
                       "invalid value 'mask' for TOP_DESCRIPTORS_VALUES: expected one of show, hash",
                       core::settings_error);
  CHECK_THROWS_WITH_AS(
      fails("TOP_DESCRIPTORS_CAPACITY", "16385"),
      "invalid value '16385' for TOP_DESCRIPTORS_CAPACITY: expected a whole number from 0 to 16384",
      core::settings_error);
  // Upstream refuses to start with CREATE and ERROR (any case) and takes anything else as WAIT.
  CHECK_THROWS_WITH_AS(
      fails("REDIS_POOL_ON_EMPTY_BEHAVIOR", "create"),
      "invalid value 'create' for REDIS_POOL_ON_EMPTY_BEHAVIOR: only WAIT is supported (Redis "
      "connections are pipelined and never run out: a request waits for its turn)",
      core::settings_error);
  CHECK_THROWS_AS(fails("REDIS_POOL_ON_EMPTY_BEHAVIOR", "ERROR"), core::settings_error);
  CHECK_NOTHROW(fails("REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT"));
  CHECK_NOTHROW(fails("REDIS_POOL_ON_EMPTY_BEHAVIOR", "block"));
  CHECK_THROWS_AS(read_everything(core::env_reader(std::map<std::string, std::string>{
                      {"REDIS_PERSECOND", "true"}, {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "Error"}})),
                  core::settings_error);
}

TEST_CASE("rate limit settings: quota mode, dynamic metadata and request headers") {
  auto s = read_everything(core::env_reader(
      std::map<std::string, std::string>{{"QUOTA_MODE", "true"},
                                         {"RESPONSE_DYNAMIC_METADATA", "true"},
                                         {"LIMIT_REQUEST_HEADERS_ENABLED", "true"},
                                         {"LIMIT_REQUEST_LIMIT_HEADER", "X-Quota-Limit"},
                                         {"LIMIT_REQUEST_REMAINING_HEADER", "X-Quota-Remaining"},
                                         {"LIMIT_REQUEST_RESET_HEADER", "X-Quota-Reset"}}));
  CHECK(s.service.global_quota_mode);
  CHECK(s.service.response_dynamic_metadata);
  CHECK(s.service.request_headers_enabled);
  CHECK(s.service.request_headers.limit == "X-Quota-Limit");
  CHECK(s.service.request_headers.remaining == "X-Quota-Remaining");
  CHECK(s.service.request_headers.reset == "X-Quota-Reset");
  CHECK(s.service.response_headers.limit == "RateLimit-Limit");

  auto bad = [](const char* name, const char* value) {
    return read_everything(
        core::env_reader(std::map<std::string, std::string>{{name, value},
                                                            {"LIMIT_RESPONSE_HEADERS_ENABLED", "true"},
                                                            {"LIMIT_REQUEST_HEADERS_ENABLED", "true"}}));
  };
  CHECK_THROWS_WITH_AS(
      bad("LIMIT_REQUEST_REMAINING_HEADER", "X Remaining"),
      "invalid value 'X Remaining' for LIMIT_REQUEST_REMAINING_HEADER: expected an HTTP header "
      "name (letters, digits and !#$%&'*+-.^_`|~)",
      core::settings_error);
  CHECK_THROWS_AS(bad("LIMIT_LIMIT_HEADER", "X-Limit:"), core::settings_error);
  CHECK_THROWS_AS(bad("LIMIT_RESET_HEADER", "Reset\xc3\xa9"), core::settings_error);
  CHECK_THROWS_AS(bad("QUOTA_MODE", "maybe"), core::settings_error);
  // Unused names are not read, as upstream.
  CHECK_NOTHROW(read_everything(
      core::env_reader(std::map<std::string, std::string>{{"LIMIT_REQUEST_RESET_HEADER", "X Bad"}})));
}

TEST_CASE(
    "rate limit settings: LIMIT_RESPONSE_HEADERS_FORMAT=ietf without the headers enabled is a warning") {
  auto read = [](std::map<std::string, std::string> env) {
    return read_everything(core::env_reader(std::move(env)));
  };
  const auto alone = read({{"LIMIT_RESPONSE_HEADERS_FORMAT", "ietf"}});
  REQUIRE(alone.warnings.size() == 1);
  CHECK(
      alone.warnings[0] ==
      "LIMIT_RESPONSE_HEADERS_FORMAT=ietf has no effect without LIMIT_RESPONSE_HEADERS_ENABLED=true: no rate "
      "limit response headers are sent");
  CHECK(read({{"LIMIT_RESPONSE_HEADERS_FORMAT", "ietf"}, {"LIMIT_RESPONSE_HEADERS_ENABLED", "true"}})
            .warnings.empty());
  CHECK(read({}).warnings.empty());
}

TEST_CASE("rate limit settings: memcache") {
  using env_map = std::map<std::string, std::string>;
  auto read = [](env_map values) {
    values["BACKEND_TYPE"] = "memcache";
    return read_everything(core::env_reader(std::move(values)));
  };
  auto s = read({{"MEMCACHE_HOST_PORT", "10.0.0.1:11211,cache-b:11212"}});
  CHECK(s.memcache().host_port == std::vector<std::string>{"10.0.0.1:11211", "cache-b:11212"});
  CHECK(s.memcache().srv.empty());
  CHECK(s.memcache().srv_refresh.count() == 0);
  CHECK(s.memcache().max_idle_conns == 2);
  CHECK_FALSE(s.memcache().tls.enabled);
  CHECK(read({{"MEMCACHE_HOST_PORT", "a:1"}, {"MEMCACHE_MAX_IDLE_CONNS", "0"}}).memcache().max_idle_conns ==
        2);
  CHECK(read({{"MEMCACHE_HOST_PORT", "a:1"}, {"MEMCACHE_MAX_IDLE_CONNS", "7"}}).memcache().max_idle_conns ==
        7);

  s = read({{"MEMCACHE_SRV", "_memcache._tcp.example.org"},
            {"MEMCACHE_SRV_REFRESH", "30s"},
            {"MEMCACHE_SRV_DNS_SERVER", "127.0.0.1:5353"}});
  CHECK(s.memcache().srv == "_memcache._tcp.example.org");
  CHECK(s.memcache().srv_refresh == std::chrono::seconds(30));
  CHECK(s.memcache().srv_dns_server == "127.0.0.1:5353");
  CHECK_THROWS_WITH_AS(
      read({{"MEMCACHE_SRV", "_m._tcp.x"}, {"MEMCACHE_SRV_DNS_SERVER", "dns.example:53"}}),
      "invalid value 'dns.example:53' for MEMCACHE_SRV_DNS_SERVER: expected an IPv4 address, with "
      "a port or not",
      core::settings_error);
  CHECK_NOTHROW(read({{"MEMCACHE_SRV", "_m._tcp.x"}, {"MEMCACHE_SRV_DNS_SERVER", "10.0.0.2"}}));

  CHECK_THROWS_WITH_AS(read({{"MEMCACHE_HOST_PORT", "a:1"}, {"COUNT_ONLY_ADMITTED", "true"}}),
                       "COUNT_ONLY_ADMITTED=true is not offered with BACKEND_TYPE=memcache: memcached cannot "
                       "check and change several counters in one step (use redis or memory)",
                       core::settings_error);
  CHECK_THROWS_WITH_AS(read({{"MEMCACHE_HOST_PORT", "a:1"}, {"MEMCACHE_SRV", "_m._tcp.x"}}),
                       "Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set", core::settings_error);
  CHECK_THROWS_WITH_AS(
      read({}),
      "BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT (host:port,...) or MEMCACHE_SRV (an SRV "
      "record name)",
      core::settings_error);
  CHECK_THROWS_WITH_AS(read({{"MEMCACHE_HOST_PORT", "a:1,b"}}),
                       "invalid value 'a:1,b' for MEMCACHE_HOST_PORT: 'b' is not host:port",
                       core::settings_error);
  CHECK_THROWS_AS(read({{"MEMCACHE_HOST_PORT", "a:x"}}), core::settings_error);
  CHECK_THROWS_AS(read({{"MEMCACHE_HOST_PORT", "a:1"}, {"MEMCACHE_MAX_IDLE_CONNS", "-1"}}),
                  core::settings_error);
  CHECK_THROWS_WITH_AS(read({{"MEMCACHE_HOST_PORT", "a:1"},
                             {"MEMCACHE_TLS", "true"},
                             {"MEMCACHE_TLS_CLIENT_CERT", "/etc/hostname"}}),
                       "MEMCACHE_TLS_CLIENT_CERT and MEMCACHE_TLS_CLIENT_KEY must be set together",
                       core::settings_error);
  CHECK_THROWS_WITH_AS(read({{"MEMCACHE_HOST_PORT", "a:1"},
                             {"MEMCACHE_TLS", "true"},
                             {"MEMCACHE_TLS_CACERT", "/nonexistent.pem"}}),
                       "invalid value '/nonexistent.pem' for MEMCACHE_TLS_CACERT: no such file",
                       core::settings_error);
  s = read({{"MEMCACHE_HOST_PORT", "a:1"},
            {"MEMCACHE_TLS", "true"},
            {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true"}});
  CHECK(s.memcache().tls.enabled);
  CHECK(s.memcache().tls.skip_hostname_verification);
}

TEST_CASE("rate limit settings: CONFIG_TYPE lists one source or both") {
  auto read = [](std::string value) {
    return read_everything(
        core::env_reader(std::map<std::string, std::string>{{"CONFIG_TYPE", std::move(value)}}));
  };
  auto s = read_everything(core::env_reader(std::map<std::string, std::string>{}));
  CHECK(s.rules.from_files);
  CHECK_FALSE(s.rules.from_xds);
  s = read("GRPC_XDS_SOTW");
  CHECK_FALSE(s.rules.from_files);
  CHECK(s.rules.from_xds);
  for (auto both : {"FILE,GRPC_XDS_SOTW", "GRPC_XDS_SOTW,FILE", "FILE, GRPC_XDS_SOTW"}) {
    s = read(both);
    CHECK(s.rules.from_files);
    CHECK(s.rules.from_xds);
    CHECK(s.xds);
  }
  CHECK_THROWS_WITH_AS(
      read("FILE,XDS"),
      "invalid value 'FILE,XDS' for CONFIG_TYPE: expected FILE, GRPC_XDS_SOTW, or both comma-separated",
      core::settings_error);
  CHECK_THROWS_WITH_AS(read("FILE,"),
                       "invalid value 'FILE,' for CONFIG_TYPE: expected FILE, GRPC_XDS_SOTW, or both "
                       "comma-separated",
                       core::settings_error);
  CHECK(read("").rules.from_files);  // empty: unset, as every setting
  CHECK_THROWS_WITH_AS(read("FILE,FILE"), "invalid value 'FILE,FILE' for CONFIG_TYPE: FILE is listed twice",
                       core::settings_error);
  CHECK_THROWS_WITH_AS(
      read("file"),
      "invalid value 'file' for CONFIG_TYPE: expected FILE, GRPC_XDS_SOTW, or both comma-separated",
      core::settings_error);
}

TEST_CASE("rate limit settings: CONFIG_TYPE=GRPC_XDS_SOTW") {
  using env_map = std::map<std::string, std::string>;
  auto read = [](env_map values) {
    values["CONFIG_TYPE"] = "GRPC_XDS_SOTW";
    return read_everything(core::env_reader(std::move(values)));
  };
  CHECK_FALSE(read_everything(core::env_reader(env_map{})).xds);
  auto s = read({});
  REQUIRE(s.xds);
  CHECK(s.xds->node.id == "default");
  CHECK(s.xds->node.metadata.empty());
  CHECK(s.xds->server_url == "localhost:18000");
  CHECK(s.xds->headers.empty());
  CHECK_FALSE(s.xds->use_tls);
  CHECK(s.xds->backoff.initial == std::chrono::seconds(10));
  CHECK(s.xds->backoff.max == std::chrono::seconds(60));
  CHECK(s.xds->backoff.random_factor == doctest::Approx(0.5));
  CHECK(s.xds->backoff.jitter);
  CHECK(s.xds->max_receive_bytes == 0);

  s = read({{"CONFIG_GRPC_XDS_NODE_ID", "rls-1"},
            {"CONFIG_GRPC_XDS_NODE_METADATA", "zone=a,url=http://x/?q=1"},
            {"CONFIG_GRPC_XDS_SERVER_URL", "xds.example:9000"},
            {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "X-Token:abc,tenant:t1"},
            {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "100ms"},
            {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "2s"},
            {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.2"},
            {"XDS_CLIENT_BACKOFF_JITTER", "false"},
            {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "16777216"}});
  CHECK(s.xds->node.id == "rls-1");
  CHECK(s.xds->node.metadata ==
        std::vector<std::pair<std::string, std::string>>{{"zone", "a"}, {"url", "http://x/?q=1"}});
  CHECK(s.xds->server_url == "xds.example:9000");
  CHECK(s.xds->headers ==
        std::vector<std::pair<std::string, std::string>>{{"x-token", "abc"}, {"tenant", "t1"}});
  CHECK(s.xds->backoff.initial == std::chrono::milliseconds(100));
  CHECK(s.xds->backoff.max == std::chrono::seconds(2));
  CHECK(s.xds->backoff.random_factor == doctest::Approx(0.2));
  CHECK_FALSE(s.xds->backoff.jitter);
  CHECK(s.xds->max_receive_bytes == 16777216);

  CHECK_THROWS_WITH_AS(
      read({{"CONFIG_GRPC_XDS_NODE_METADATA", "zone:a"}}),
      "invalid value 'zone:a' for CONFIG_GRPC_XDS_NODE_METADATA: item 'zone:a' is not key=value "
      "(expected k1=v1,k2=v2)",
      core::settings_error);
  CHECK_THROWS_WITH_AS(read({{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "x token:1"}}),
                       "invalid value for CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'x token' is not a gRPC "
                       "metadata name (letters, digits, '-', '_', '.', not starting with grpc-)",
                       core::settings_error);
  CHECK_THROWS_AS(read({{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "novalue"}}), core::settings_error);
  CHECK_THROWS_WITH_AS(
      read({{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "2m"}}),
      "invalid XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (120000 ms) and XDS_CLIENT_BACKOFF_MAX_INTERVAL "
      "(60000 ms): expected 0 < initial <= max",
      core::settings_error);
  CHECK_THROWS_AS(read({{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "1.5"}}), core::settings_error);
  CHECK_THROWS_AS(read({{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3"}}), core::settings_error);
  CHECK_THROWS_WITH_AS(
      read({{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
            {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/nonexistent/ca.pem"}}),
      "cannot read '/nonexistent/ca.pem' for CONFIG_GRPC_XDS_SERVER_TLS_CACERT: No such file or "
      "directory",
      core::settings_error);
  CHECK_THROWS_WITH_AS(
      read({{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/etc/hostname"}}),
      "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY must be set together",
      core::settings_error);
}

TEST_CASE("rate limit settings: REDIS_SYNC_INTERVAL") {
  using env_map = std::map<std::string, std::string>;
  auto read = [](env_map values) { return read_everything(core::env_reader(std::move(values))); };
  auto s = read({});
  CHECK(s.redis().sync_interval.count() == 0);
  CHECK(s.redis().sync_max_keys == 1'000'000);
  s = read({{"REDIS_SYNC_INTERVAL", "50ms"}, {"REDIS_SYNC_MAX_KEYS", "5000"}});
  CHECK(s.redis().sync_interval == std::chrono::milliseconds(50));
  CHECK(s.redis().sync_max_keys == 5000);
  CHECK(read({{"REDIS_SYNC_INTERVAL", "10s"}}).redis().sync_interval == std::chrono::seconds(10));
  CHECK(read({{"REDIS_SYNC_INTERVAL", "0"}}).redis().sync_interval.count() == 0);
  const auto range = [](const std::string& value) {
    return "invalid value '" + value +
           "' for REDIS_SYNC_INTERVAL: expected 0 or a duration from 1ms to 10s (the overshoot grows with "
           "it; see docs/concepts/batched-counting.md)";
  };
  CHECK_THROWS_WITH_AS(read({{"REDIS_SYNC_INTERVAL", "11s"}}), range("11s").c_str(), core::settings_error);
  CHECK_THROWS_WITH_AS(read({{"REDIS_SYNC_INTERVAL", "500us"}}), range("500us").c_str(),
                       core::settings_error);
  CHECK_THROWS_AS(read({{"REDIS_SYNC_INTERVAL", "soon"}}), core::settings_error);
  CHECK_THROWS_AS(read({{"REDIS_SYNC_MAX_KEYS", "10"}}), core::settings_error);
  CHECK_THROWS_WITH_AS(
      read({{"REDIS_SYNC_INTERVAL", "50ms"}, {"BACKEND_TYPE", "memory"}}),
      "REDIS_SYNC_INTERVAL applies to BACKEND_TYPE=redis only (BACKEND_TYPE is memory): unset it",
      core::settings_error);
  CHECK_NOTHROW(read({{"REDIS_SYNC_INTERVAL", "0s"}, {"BACKEND_TYPE", "memory"}}));
  CHECK_THROWS_WITH_AS(
      read({{"REDIS_SYNC_INTERVAL", "50ms"}, {"COUNT_ONLY_ADMITTED", "true"}}),
      "COUNT_ONLY_ADMITTED=true cannot be combined with REDIS_SYNC_INTERVAL: a request counted "
      "only when every limit admits needs each counter checked and changed in Redis in one step, "
      "which batching gives up (unset one of them)",
      core::settings_error);
}
