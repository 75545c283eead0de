#pragma once
// Backend-independent counting math (upstream's base limiter, reference §4): cache keys and windows, TTL
// jitter, the local over-limit cache, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT selection, and the
// per-descriptor decision with its near/over/within/shadow accounting. It never does I/O; the service drives
// a backend between prepare() and finish().

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
#include "ratelimit/limiter/local_cache.hpp"
#include "rls.pb.h"

namespace sluice::ratelimit::limiter {

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
};

struct descriptor_work {
  std::optional<applied_limit> limit;           // nullopt: no limit, the status is plain OK
  bool unlimited = false;                       // OK with limit_remaining = UINT32_MAX, no counting
  std::uint64_t hits = 1;                       // hits_addend for this descriptor
  bool negative = false;                        // is_negative_hits: the hits are given back
  std::span<const config::entry> entries;       // the request's entries
  std::vector<std::string_view> shared_values;  // share_threshold patterns per entry (may be empty)
  std::string cache_key;
  bool over_via_local_cache = false;
  std::size_t op = SIZE_MAX;  // index into work::ops when sent to the backend
};

// Requests usually carry a handful of descriptors: keep them inline, without heap allocations.
template <typename T>
using small_vector = boost::container::small_vector<T, 4>;

struct work {
  std::string_view domain;
  small_vector<descriptor_work> items;
  small_vector<counter_op> ops;
  small_vector<std::uint64_t> values;  // backend results, one per op
  std::int64_t now = 0;
};

using response_status = envoy::service::ratelimit::v3::RateLimitResponse::DescriptorStatus;

class limiter {
 public:
  using jitter_source = std::function<std::uint32_t(std::uint32_t max_exclusive)>;

  limiter(settings s, const core::clock& clock, jitter_source jitter = {});

  // Keys, local-cache short cuts, total_hits, and the backend operations.
  void prepare(work& w);
  // STOP mode: whether to read the counters before incrementing.
  bool wants_precheck(const work& w) const;
  // STOP mode: with the current values in w.values, keep only the increments of keys that would exceed.
  void apply_precheck(work& w);
  // With the post-increment values in w.values: one status per item, stats, local cache.
  void finish(work& w, std::span<response_status*> statuses);

 private:
  std::uint64_t near_threshold(std::uint32_t limit) const;

  settings settings_;
  const core::clock& clock_;
  jitter_source jitter_;
  local_cache local_cache_;
};

}  // namespace sluice::ratelimit::limiter
