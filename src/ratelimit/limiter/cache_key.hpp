#pragma once
// upstream's cache key, byte for byte (reference §4.3):
//   CACHE_KEY_PREFIX + domain + "_" + for each entry (key + "_" + value + "_") + window start
// No escaping, and the unit is not part of the key, exactly as upstream, so both can share one Redis.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ratelimit/config/rule_set.hpp"

namespace sluice::ratelimit::limiter {

// `shared_values[i]`, when non-empty, replaces entry i's value (share_threshold patterns).
void build_cache_key(std::string& out, std::string_view prefix, std::string_view domain,
                     std::span<const config::entry> entries, std::span<const std::string_view> shared_values,
                     std::int64_t window_start);

// Start of the epoch-aligned window containing `now`.
inline std::int64_t window_start(std::int64_t now, std::int64_t unit_seconds) {
  return now / unit_seconds * unit_seconds;
}
// Seconds until the window ends: 1..unit_seconds, never 0.
inline std::int64_t seconds_until_reset(std::int64_t now, std::int64_t unit_seconds) {
  return unit_seconds - now % unit_seconds;
}

}  // namespace sluice::ratelimit::limiter
