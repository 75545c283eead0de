#pragma once
// BACKEND_TYPE=redis: its settings (REDIS_*, REDIS_PERSECOND_*), read once from the environment with
// upstream's names and defaults. Anything invalid throws core::settings_error naming the variable.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.hpp"
#include "ratelimit/backends/redis/region_settings.hpp"
#include "redis/connection.hpp"

namespace sluice::ratelimit::backends::redis {

// One Redis store (REDIS_* or REDIS_PERSECOND_*).
struct redis_store_settings {
  sluice::redis::connection_config connection;
  std::size_t pool_size = 10;
  std::vector<std::string> cluster_seeds;  // REDIS_TYPE=cluster: the nodes in REDIS_URL
};

struct redis_settings {
  redis_store_settings main;
  std::optional<redis_store_settings> per_second;    // REDIS_PERSECOND=true
  bool health_check_active_connection = false;       // REDIS_HEALTH_CHECK_ACTIVE_CONNECTION
  std::chrono::milliseconds startup_max_elapsed{0};  // REDIS_STARTUP_MAX_ELAPSED_TIME: 0 = wait forever
  // REDIS_SYNC_INTERVAL: 0 sends every hit at once; otherwise counters are decided locally and their hits
  // sent in batches this often (synced_backend.hpp).
  std::chrono::milliseconds sync_interval{0};
  std::size_t sync_max_keys = 1'000'000;   // REDIS_SYNC_MAX_KEYS: the counters held locally, per instance
  bool limit_tables = false;               // LIMIT_TABLES_REDIS: limit tables are read from `main` too
  std::optional<region_settings> regions;  // REDIS_REGION: several regions under one limit
};

// `limit_tables`: LIMIT_TABLES_REDIS; `count_only_admitted`: COUNT_ONLY_ADMITTED (not with batching).
redis_settings read_redis_settings(const core::env_reader& env, bool limit_tables, bool count_only_admitted);
// Their declarations (core/setting.hpp), REDIS_PERSECOND_* listed one by one.
std::vector<core::setting> redis_backend_settings();
// With another BACKEND_TYPE: refuses the settings that would do nothing there.
void refuse_redis_settings(const core::env_reader& env, std::string_view backend_type);

}  // namespace sluice::ratelimit::backends::redis
