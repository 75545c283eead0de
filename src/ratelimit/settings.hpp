#pragma once
// The rate limit module's settings, read once from the environment with upstream's names and defaults
// (reference §1). Anything invalid throws core::settings_error naming the variable.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/env.hpp"
#include "core/tls_client.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/rlqs/settings.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/service/service.hpp"
#include "ratelimit/xds/client.hpp"
#include "redis/connection.hpp"

namespace sluice::ratelimit {

// One Redis store (REDIS_* or REDIS_PERSECOND_*).
struct redis_store_settings {
  redis::connection_config connection;
  std::size_t pool_size = 10;
  std::vector<std::string> cluster_seeds;  // REDIS_TYPE=cluster: the nodes in REDIS_URL
};

struct redis_settings {
  redis_store_settings main;
  std::optional<redis_store_settings> per_second;    // REDIS_PERSECOND=true
  bool health_check_active_connection = false;       // REDIS_HEALTH_CHECK_ACTIVE_CONNECTION
  std::chrono::milliseconds startup_max_elapsed{0};  // REDIS_STARTUP_MAX_ELAPSED_TIME: 0 = wait forever
  // REDIS_SYNC_INTERVAL: 0 sends every hit at once; otherwise counters are decided locally and their hits
  // sent in batches this often (backends/redis/synced_backend.hpp).
  std::chrono::milliseconds sync_interval{0};
  std::size_t sync_max_keys = 1'000'000;  // REDIS_SYNC_MAX_KEYS: the counters held locally, per instance
  bool limit_tables = false;              // LIMIT_TABLES_REDIS: limit tables are read from `main` too
};

// BACKEND_TYPE=memcache (MEMCACHE_*).
struct memcache_settings {
  std::vector<std::string> host_port;        // MEMCACHE_HOST_PORT, in order
  std::string srv;                           // MEMCACHE_SRV: the nodes are its targets
  std::chrono::milliseconds srv_refresh{0};  // MEMCACHE_SRV_REFRESH: 0 = resolve once
  std::string srv_dns_server;                // MEMCACHE_SRV_DNS_SERVER: "" = /etc/resolv.conf
  std::size_t max_idle_conns = 2;            // MEMCACHE_MAX_IDLE_CONNS: connections per node
  core::tls_client_config tls;               // MEMCACHE_TLS*
};

struct module_settings {
  std::string backend_type = "redis";                     // BACKEND_TYPE: redis | memcache | memory
  bool force_start_without_initial_config = false;        // FORCE_START_WITHOUT_INITIAL_CONFIG
  std::size_t memory_max_counters = 2'000'000;            // MEMORY_MAX_COUNTERS
  std::string memory_snapshot_file;                       // MEMORY_SNAPSHOT_FILE: "" = none
  std::chrono::milliseconds memory_snapshot_interval{0};  // MEMORY_SNAPSHOT_INTERVAL: 0 = only at stop
  std::size_t top_descriptors_capacity = 256;  // TOP_DESCRIPTORS_CAPACITY: per list, worker, 10 s; 0: off
  bool top_descriptors_hash_values = false;    // TOP_DESCRIPTORS_VALUES=hash (default show)
  redis_settings redis;                        // read only when backend_type is redis
  memcache_settings memcache;                  // read only when backend_type is memcache
  service::rules_source_settings rules;        // the rule files (CONFIG_TYPE lists FILE) and the sources
  std::optional<xds::client_settings> xds;     // the xDS server, when CONFIG_TYPE lists GRPC_XDS_SOTW
  service::limit_tables_settings tables;       // LIMIT_TABLES_*
  service::settings service;
  limiter::settings limiter;
  rlqs::settings rlqs;  // RLQS_*
  // Settings accepted that do nothing as given: logged at warning once logging is set up.
  std::vector<std::string> warnings;
};

module_settings read_module_settings(const core::env_reader& env);

}  // namespace sluice::ratelimit
