#pragma once
// Several regions under one limit (docs/guides/regions.md): REDIS_REGION, REDIS_REMOTE_REGIONS,
// REDIS_REMOTE_AUTH_FILE, REDIS_REMOTE_SYNC_INTERVAL, REDIS_REMOTE_MAX_LAG, REDIS_REMOTE_FALLBACK. Anything
// invalid throws core::settings_error naming the variable.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.hpp"
#include "core/problem.hpp"
#include "core/setting.hpp"
#include "redis/connection.hpp"

namespace sluice::ratelimit::backends::redis {

// While a remote region cannot be read (REDIS_REMOTE_FALLBACK).
enum class remote_fallback {
  last,   // its last totals, until their windows end; then nothing
  share,  // the rest of each window's limit split evenly among the regions; later windows limit / regions
};

// One other region: the Redis in this region that holds its counters (typically a replica of its primary).
struct remote_region {
  std::string name;
  sluice::redis::connection_config connection;
};

struct region_settings {
  std::string region;  // REDIS_REGION
  std::vector<remote_region> remotes;
  std::chrono::milliseconds sync_interval{250};  // REDIS_REMOTE_SYNC_INTERVAL
  std::chrono::milliseconds max_lag{2000};       // REDIS_REMOTE_MAX_LAG
  remote_fallback fallback = remote_fallback::last;
  // REDIS_REMOTE_COLD_INTERVAL (0: off): a fixed or sliding window's counter that cannot reach its limit
  // before the next read, at twice the rates last seen, is read at least this often instead of every round.
  std::chrono::milliseconds cold_interval{0};
  std::string key_prefix;  // CACHE_KEY_PREFIX: the heartbeat's key is <prefix>sluice_region:<region>

  // Every region, this one included.
  std::size_t region_count() const { return remotes.size() + 1; }
};

// Null without REDIS_REGION. `main` is the region's own store (REDIS_*): the remote connections take its
// timeouts and TLS settings; `cluster`: REDIS_TYPE=cluster, which regions refuse.
std::optional<region_settings> read_region_settings(const core::env_reader& env,
                                                    const sluice::redis::connection_config& main,
                                                    bool cluster);
// Their declarations.
std::span<const core::setting> region_backend_settings();

// A rule's algorithm (as the YAML names it) that cannot be shared across regions: why (GCRA: an arrival time
// cannot be summed over regions). Nothing without REDIS_REGION.
core::problem region_refuses_algorithm(const std::optional<region_settings>& regions,
                                       std::string_view algorithm);

}  // namespace sluice::ratelimit::backends::redis
