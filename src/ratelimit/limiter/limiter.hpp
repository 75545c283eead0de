#pragma once
// Backend-independent counting math (upstream's base limiter, reference §4): cache keys and windows, TTL
// jitter, the local over-limit cache, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT selection, and the
// per-descriptor decision with its near/over/within/shadow accounting — for each of a descriptor's limits and
// each algorithm. It never does I/O; the service drives a backend between prepare() and finish().

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "core/clock.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "ratelimit/limiter/cache_key.hpp"
#include "ratelimit/limiter/calendar_cache.hpp"
#include "ratelimit/limiter/local_cache.hpp"
#include "rls.pb.h"

namespace sluice::ratelimit::limiter {

inline constexpr std::int64_t micros_per_second = 1'000'000;

struct settings {
  double near_limit_ratio = 0.8;                         // NEAR_LIMIT_RATIO
  std::string cache_key_prefix;                          // CACHE_KEY_PREFIX
  std::uint32_t expiration_jitter_max_seconds = 300;     // EXPIRATION_JITTER_MAX_SECONDS
  std::size_t local_cache_size_bytes = 0;                // LOCAL_CACHE_SIZE_IN_BYTES
  bool stop_cache_key_increment_when_overlimit = false;  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
};

// A limit that applies to one request descriptor: a configured rule or an override sent in the request.
struct applied_limit {
  std::uint32_t requests_per_unit = 0;
  config::unit unit = config::unit::unknown;
  const std::string* name = nullptr;  // the rule's name, for current_limit.name
  bool shadow_mode = false;
  config::rule_stats stats;
  config::algorithm algorithm = config::algorithm::fixed_window;
  std::uint32_t unit_multiplier = 1;
  std::uint32_t burst = 0;                // gcra; 0 means requests_per_unit
  std::string_view key_tag;               // empty: upstream's cache key
  double near_limit_ratio = -1;           // negative: NEAR_LIMIT_RATIO
  bool usage = false;                     // accounting: usage (backend.hpp, counter_op::usage)
  const date::time_zone* zone = nullptr;  // time_zone: calendar windows (config/calendar.hpp)
  std::int64_t lease_seconds = 0;         // concurrency: `lease` (leases.hpp)
  bool per_holder = false;                // concurrency: `holder_key` names the last entry's holder
  std::string_view stats_key;             // the rule's (config::rate_limit::stats_key)

  // The window's length in seconds (a concurrency limit's: its lease).
  std::int64_t window_seconds() const {
    return config::window_seconds_of(algorithm, unit, unit_multiplier, lease_seconds);
  }
  // A GCRA bucket's size.
  std::uint64_t gcra_burst() const { return burst != 0 ? burst : requests_per_unit; }

  // A configured rule's limit, counted under `stats`.
  static applied_limit of_rule(const config::rate_limit& rule, const config::descriptor_node& node,
                               config::rule_stats stats);
};

struct limit_work {
  applied_limit limit;
  std::string cache_key;
  std::string previous_key;     // sliding windows: the previous window's counter
  std::int64_t window_end = 0;  // Unix seconds: when the current window ends
  bool over_via_local_cache = false;
  std::size_t op = SIZE_MAX;  // index into work::ops when sent to the backend
};

struct descriptor_work {
  // Usually one; none: no limit, the status is plain OK.
  boost::container::small_vector<limit_work, 1> limits;
  bool unlimited = false;  // OK with limit_remaining = UINT32_MAX, no counting
  std::uint64_t hits = 1;  // hits_addend for this descriptor
  bool negative = false;   // is_negative_hits: the hits are given back
  bool quota = false;      // a quota descriptor (quota_mode, QUOTA_MODE)
  // Operator control of a holder_key limit addressed without its holder's entry (the whole set of holders):
  // the last entry in `entries` is the rule's key with no value, not a holder.
  bool whole_holder_set = false;
  std::span<const config::entry> entries;       // the request's entries
  std::vector<std::string_view> shared_values;  // share_threshold patterns per entry (may be empty)
  // Set by finish(): the limit the status shows, and whether it was over (shadow mode's too).
  std::size_t shown = 0;
  bool over = false;
};

// Requests usually carry a handful of descriptors: keep them inline, without heap allocations.
template <typename T>
using small_vector = boost::container::small_vector<T, 4>;

struct work {
  std::string_view domain;
  small_vector<descriptor_work> items;
  bool all_or_nothing = false;  // count_only_admitted: a request over any limit consumes nothing
  small_vector<counter_op> ops;
  small_vector<op_result> values;  // backend results, one per op
  batch_mode mode = batch_mode::independent;
  std::int64_t now = 0;     // seconds
  std::int64_t now_us = 0;  // the same instant, in microseconds
  // The calling worker's calendar windows (per worker, never shared: the limiter serves every worker). Null:
  // each window is computed afresh (tests, one-off callers).
  calendar_cache* calendars = nullptr;
};

using response_status = envoy::service::ratelimit::v3::RateLimitResponse::DescriptorStatus;

// Shared by every worker: immutable settings, and the local over-limit cache (local_cache.hpp: sharded, a
// mutex per shard). A decision's state is its own `work`; a worker's, its calendar_cache.
class limiter {
 public:
  using jitter_source = std::function<std::uint32_t(std::uint32_t max_exclusive)>;

  limiter(settings s, const core::clock& clock, jitter_source jitter = {});

  // Keys, local-cache short cuts, total_hits, and the backend operations with their batch mode.
  void prepare(work& w);
  // STOP mode: whether to read the counters before incrementing.
  bool wants_precheck(const work& w) const;
  // STOP mode: with the current values in w.values, keep only the increments of keys that would exceed.
  void apply_precheck(work& w);
  // With the backend's results in w.values: one status per item, stats, local cache.
  void finish(work& w, std::span<response_status*> statuses);

  // Operator control (the counters API, explain): each limit's op with no hits in w.ops — nothing counted,
  // no stats, no local cache, no jitter — for backend::inspect or backend::overwrite. The items' hits become
  // 0.
  void describe(work& w);
  // One limit's state from backend::inspect's results in w.values (after describe).
  struct limit_state {
    std::uint64_t used = 0;      // against `capacity` (GCRA: the hits not yet refilled, debt included)
    std::uint64_t capacity = 0;  // the limit (GCRA: the burst)
    std::uint64_t remaining = 0;
    // Until the counter frees up (GCRA: until the bucket is full again; 0 if it is).
    std::int64_t reset_seconds = 0;
  };
  limit_state state_of(const work& w, const descriptor_work& item, const limit_work& lw) const;
  // The `increment` for backend::overwrite that leaves `used` hits counted on `op` (GCRA: an arrival time).
  static std::uint64_t overwrite_value(const counter_op& op, std::uint64_t used);
  // Forgets what the local over-limit cache knows of w's keys (after an operator changed them).
  void forget(const work& w);

 private:
  struct outcome;
  outcome judge(const work& w, const descriptor_work& item, const limit_work& lw) const;
  static limit_state gcra_state(const work& w, const limit_work& lw);
  static batch_mode assign_roles(work& w);
  void count_stats(const descriptor_work& item, const limit_work& lw, const outcome& o);
  std::uint64_t near_threshold(const applied_limit& limit, std::uint64_t capacity) const;
  // The window of `limit` that holds `now`: a calendar window, or the epoch-aligned one of fixed length.
  static config::calendar_window window_of(const applied_limit& limit, std::int64_t now,
                                           calendar_cache* calendars);
  // The backend op of one limit (key, kind, window, TTL without jitter), its key written into `lw`.
  counter_op describe_op(const work& w, const descriptor_work& item, const key_parts& parts, limit_work& lw);
  void count_leases(const work& w, const descriptor_work& item, const limit_work& lw, bool applied_nothing);

  settings settings_;
  const core::clock& clock_;
  jitter_source jitter_;
  local_cache local_cache_;
};

}  // namespace sluice::ratelimit::limiter
