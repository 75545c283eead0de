#pragma once
// Several regions (docs/guides/regions.md): what the other regions hold of the keys this instance uses. The
// control thread's region_reader builds one immutable view per round of remote reads and gives it to every
// worker; a worker's regional_backend looks keys up in it with no lock, and lists the keys it used that the
// view lacks (tracked_key) for the next round.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ratelimit/limiter/counter_op.hpp"

namespace sluice::ratelimit::backends::redis {

// How a key's remote total is read.
enum class remote_kind : std::uint8_t {
  counter,  // GET: a fixed or sliding window's counter
  leases,   // HGETALL: a concurrency limit's slices (leases.hpp), summed over the slices still held
  holders,  // ZRANGEBYSCORE and HGETALL: a concurrency limit per holder, the live holders' slots summed
};

// A key a worker used, as the reader needs it: how to read it, its limit (the `share` fallback splits it) and
// until when it matters.
struct tracked_key {
  remote_kind kind = remote_kind::counter;
  std::uint64_t limit = 0;
  std::int64_t window_end_us = 0;  // counters: when their window ends (0: concurrency, which has none)
  std::int64_t until_us = 0;       // dropped after this, unless used again (concurrency)
  limiter::lease_timing timing;    // leases
  std::int64_t lease_us = 0;       // concurrency: renews until_us on use
  bool previous = false;     // a sliding window's previous counter (`share` counts the current one only)
  std::int64_t seen_us = 0;  // when the reader first had it
  std::string rule;          // the limit's stats key: its overshoot gauge
  std::uint64_t local = 0;  // REDIS_REMOTE_COLD_INTERVAL: this region's count, as the first results showed it
  std::uint32_t slot = 0;   // given by the reader (remote_view)
};

// A tracked key's name, shared: the reader's index and each worker's key -> slot map look it up through a
// string_view into this one string, which the views that add and drop the key keep alive until every worker
// has applied them.
using shared_key = std::shared_ptr<const std::string>;

struct transparent_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// One round's totals, by slot: the reader gives each key a slot when it first tracks it, and the slot stays
// the key's until the key is dropped (then another key may take it). Each view carries the changes to the key
// -> slot map since the view before; every view reaches every worker, in order, so a worker's map follows by
// applying them (additions first: a key first tracked at a window's end may be added and dropped in one view;
// a dropped key comes back only in a later view, and a freed slot is given again only in a later view).
struct remote_view {
  std::vector<std::uint64_t> totals;  // what the other regions hold (or what `share` leaves to this one)
  std::vector<std::pair<shared_key, std::uint32_t>> added;
  std::vector<shared_key> removed;  // (kept alive here until every worker has dropped its entry)
  // REDIS_REMOTE_FALLBACK=share during a partition: the regions a limit is split among. A key not read yet
  // then leaves this region limit / share_regions (0: not sharing; a key not read yet counts nothing remote).
  std::uint64_t share_regions = 0;
  // Set by a worker that used a concurrency key's slot (once per view): the reader keeps reading it.
  std::unique_ptr<std::atomic<bool>[]> used;
  // REDIS_REMOTE_COLD_INTERVAL (else null): this region's own count of a counter key as the workers' results
  // saw it, raised by a worker only once it has grown by local_step (so rarely written); the reader takes the
  // highest it finds as how far this region got, which decides how often the key must be read.
  std::unique_ptr<std::atomic<std::uint64_t>[]> local_seen;
  static std::uint64_t local_step(std::uint64_t limit) { return std::max<std::uint64_t>(1, limit / 32); }

  explicit remote_view(std::size_t slots, bool cold = false)
      : totals(slots),
        used(std::make_unique<std::atomic<bool>[]>(slots)),
        local_seen(cold ? std::make_unique<std::atomic<std::uint64_t>[]>(slots) : nullptr) {}
};

using remote_view_ptr = std::shared_ptr<const remote_view>;

}  // namespace sluice::ratelimit::backends::redis
