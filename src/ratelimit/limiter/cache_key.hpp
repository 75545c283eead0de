#pragma once
// upstream's cache key, byte for byte (reference §4.3):
//   CACHE_KEY_PREFIX + domain + "_" + for each entry (key + "_" + value + "_") + window start
// No escaping, and the unit is not part of the key, exactly as upstream, so both can share one Redis.
//
// A limit upstream cannot express (another algorithm, a unit_multiplier, one of several limits on a
// descriptor) has a key of its own form:
//   "{" + the same base + "}" + [window start + "_"] + tag        tag = "<window
//   seconds>s_<fixed|sliding|gcra>"
// It ends with a letter, and every upstream key ends with "_" and digits, so the two never collide. The
// braces are a Redis Cluster hash tag: every such key of one descriptor (the current and previous windows of
// a sliding window, all of its limits) lives in one slot, so one script can check them together.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ratelimit/config/rule_set.hpp"

namespace sluice::ratelimit::limiter {

struct key_parts {
  std::string_view prefix;
  std::string_view domain;
  std::span<const config::entry> entries;
  std::span<const std::string_view> shared_values;  // [i], when non-empty, replaces entry i's value
};

void build_cache_key(std::string& out, const key_parts& parts, std::int64_t window_start);
// The key of a limit with a tag; `window_start` is absent for GCRA (one key for all time).
void build_tagged_key(std::string& out, const key_parts& parts, std::optional<std::int64_t> window_start,
                      std::string_view tag);

// Start of the epoch-aligned window containing `now`.
inline std::int64_t window_start(std::int64_t now, std::int64_t unit_seconds) {
  return now / unit_seconds * unit_seconds;
}
// Seconds until the window ends: 1..unit_seconds, never 0.
inline std::int64_t seconds_until_reset(std::int64_t now, std::int64_t unit_seconds) {
  return unit_seconds - now % unit_seconds;
}

}  // namespace sluice::ratelimit::limiter
