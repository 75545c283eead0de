#pragma once
// BACKEND_TYPE=memcache: counters in memcached with upstream's keys and commands, so Sluice and
// envoyproxy/ratelimit can share the nodes. Per node holding some of a decision's keys, one write:
// `get <keys>` (upstream's multi-get, for its stats) and `incr <key> <hits>` for each key; a key that does
// not exist yet is created with `add <key> <hits>` and its window's TTL (an exptime past 30 days as an
// absolute time), and `incr` is sent again when another instance created it first. The decision uses incr's
// answer — the count after this request's hits, atomic on the node — not the value read before, so no burst
// gets through (upstream decides on the multi-get's stale value and increments later). Negative hits are
// `decr`, which memcached stops at 0. One instance per worker, used on that worker's thread only.

#include <atomic>
#include <cstdint>

#include "core/clock.hpp"
#include "memcache/client.hpp"
#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::backends::memcache {

// upstream's ratelimit.memcache.* counters, for one worker (summed over the workers at flush).
struct memcache_counts {
  std::atomic<std::uint64_t> multiget_success{0}, multiget_error{0};
  std::atomic<std::uint64_t> increment_success{0}, increment_miss{0}, increment_error{0};
  std::atomic<std::uint64_t> add_success{0}, add_error{0}, add_not_stored{0};
  std::atomic<std::uint64_t> keys_requested{0}, keys_found{0};
};

class memcache_backend final : public limiter::backend {
 public:
  memcache_backend(sluice::memcache::client& client, const core::clock& clock)
      : client_(client), clock_(clock) {}

  // Fixed and sliding windows (a sliding window's hits that it did not admit are taken back with a second
  // write); GCRA and all-or-nothing batches fail with an error that says why.
  void increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                 limiter::completion& done, limiter::batch_mode mode) override;
  void get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done) override;
  // (operator_control.cpp) One request per key, to its node: get; set or delete.
  void inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
               limiter::completion& done) override;
  void overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) override;

  // upstream's span around the get-multi: "Memcached Fetch Execution" with its "keysToGet length".
  limiter::trace_description describe_for_trace(std::span<const limiter::counter_op> ops) const override {
    return {"Memcached Fetch Execution", {{{"keysToGet length", static_cast<std::int64_t>(ops.size())}}}, 1};
  }

  const memcache_counts& counts() const { return counts_; }

 private:
  friend struct batch;
  void run(bool increment, std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done);
  sluice::memcache::client& client_;
  const core::clock& clock_;
  memcache_counts counts_;
};

}  // namespace sluice::ratelimit::backends::memcache
