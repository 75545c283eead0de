#pragma once
// BACKEND_TYPE=memory: counters in this process, with the observable behaviour of the Redis backend (same
// keys, same fixed windows, TTL = unit + jitter refreshed on every increment). Decisions complete inline on
// the caller's thread. Counters live in sharded open-addressing tables (one small lock per shard, no global
// lock); expired counters are reclaimed by sweep() and whenever the store is full. Many shards (32768, 4 MB),
// so workers deciding on different keys rarely write the same shard: with 4096, a fifth of one worker's keys
// (at 1,000 keys each) share a shard with the other's, and two workers reached about 1.65x one worker's rate
// instead of 1.9-2.0x (scripts/bench contention, BENCHMARKS.md).
//
// Sliding windows and GCRA keep their state in the same tables (a GCRA key's value is its arrival time in
// microseconds); concurrency limits' leases in tables of their own (few keys: 64 shards), counted against the
// same bound. They are never part of an all-or-nothing batch (refused). An all-or-nothing batch locks every
// shard it touches, in index order, applies its ops in turn and undoes them unless the batch's verdict
// (limiter::batch_verdict) admits.
//
// Memory bound: at most `max_counters` live counters (MEMORY_MAX_COUNTERS), counted store-wide (only a new
// counter touches that count). An increment that needs a new counter when the store is full (after
// reclaiming its shard's expired counters) fails with a backend_error that names the setting: the decision is
// answered UNAVAILABLE rather than silently not counted.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "core/clock.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "ratelimit/limiter/leases.hpp"

namespace sluice::ratelimit::backends::memory {

namespace detail {

// A key in one allocation (length + bytes): 8 bytes in the table instead of a 32-byte std::string.
class compact_key {
 public:
  explicit compact_key(std::string_view s);
  std::string_view view() const;

 private:
  std::unique_ptr<char[]> data_;
};

struct key_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  std::size_t operator()(const compact_key& k) const { return (*this)(k.view()); }
};

struct key_equal {
  using is_transparent = void;
  static std::string_view v(std::string_view s) { return s; }
  static std::string_view v(const compact_key& k) { return k.view(); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return v(a) == v(b);
  }
};

struct counter_entry {
  std::uint64_t value;
  std::int64_t expires_at;  // Unix seconds; the counter is gone at or after this time
};

// A concurrency limit's leases (limiter/leases.hpp): per slice, or per holder (holder_key; the key's name
// tells which). Gone with its newest lease.
struct lease_entry {
  limiter::lease_slices slices;
  limiter::lease_holders holders;
  std::int64_t expires_at;  // Unix seconds
};

// When an entry may be dropped: a second after its newest lease ends (Unix seconds); 0 when it holds nothing.
// `op` is one of the entry's ops (its lease's form and timing).
std::int64_t lease_entry_expiry(const lease_entry& e, const limiter::counter_op& op);

}  // namespace detail

class memory_backend final : public limiter::backend {
 public:
  static constexpr std::size_t shard_count = 32768;

  memory_backend(const core::clock& clock, std::size_t max_counters);

  void increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                 limiter::completion& done, limiter::batch_mode mode) override;
  void get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done) override;
  // (operator_control.cpp)
  void inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
               limiter::completion& done) override;
  void overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) override;

  // Drops expired counters from `count` shards, continuing where the last call stopped; returns how many.
  std::size_t sweep(std::size_t count = shard_count);
  // Live and expired-but-not-yet-swept counters.
  std::size_t size() const;

  // Every counter live at `now` (Unix seconds), a shard at a time under its lock (MEMORY_SNAPSHOT_FILE); then
  // every concurrency key's leases.
  using counter_visitor =
      std::function<void(std::string_view key, std::uint64_t value, std::int64_t expires_at)>;
  using lease_visitor = std::function<void(std::string_view key, const detail::lease_entry& leases)>;
  void visit_live(std::int64_t now, const counter_visitor& counters, const lease_visitor& leases = {}) const;
  // Puts back a counter (or leases) read from a snapshot, unless the key holds one already or the store is
  // full; whether it did.
  bool restore(std::string_view key, std::uint64_t value, std::int64_t expires_at);
  bool restore_leases(std::string_view key, detail::lease_entry leases);

 private:
  using table = boost::unordered_flat_map<detail::compact_key, detail::counter_entry, detail::key_hash,
                                          detail::key_equal>;
  struct alignas(64) shard {
    mutable std::mutex mutex;
    table counters;
    // counters.size(), written under the lock and read without it: sweeps pass over empty shards unlocked.
    std::atomic<std::uint32_t> used{0};
  };

  // What an all-or-nothing batch changed in one counter, to put back when the batch does not admit.
  struct undo_entry {
    shard* s;
    std::string_view key;
    bool created;
    detail::counter_entry before;
  };

  static constexpr std::size_t lease_shard_count = 64;
  struct alignas(64) lease_shard {
    mutable std::mutex mutex;
    boost::unordered_flat_map<detail::compact_key, detail::lease_entry, detail::key_hash, detail::key_equal>
        leases;
  };
  lease_shard& lease_shard_for(std::string_view key) {
    return lease_shards_[detail::key_hash{}(key) % lease_shard_count];
  }
  // A concurrency op (limiter/leases.hpp) under its shard's lock; false when it needs a new key and the store
  // is full.
  bool apply_lease(const limiter::counter_op& op, limiter::op_result& out);
  std::size_t sweep_leases(std::int64_t now);
  // Operator control: a counter set to `value` (0: deleted) until `expires_at`; leases set to `held` slots.
  void overwrite_counter(std::string_view key, std::uint64_t value, std::int64_t expires_at,
                         std::int64_t now);
  void overwrite_leases(const limiter::counter_op& op, std::uint64_t held);

  shard& shard_for(std::size_t hash) { return shards_[hash % shard_count]; }
  shard& shard_for(std::string_view key) { return shard_for(detail::key_hash{}(key)); }
  // A live counter's value, 0 when absent or expired (the shard's lock held).
  static std::uint64_t read_locked(shard& s, std::string_view key, std::int64_t now);
  // Writes an op's result (the shard's lock held). False when it needs a new counter and the store is full
  // (after reclaiming this shard). `undo`, when given, records how to put the counter back.
  bool store_locked(shard& s, const limiter::counter_op& op, std::uint64_t value, std::int64_t now,
                    std::vector<undo_entry>* undo);
  void increment_each(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                      limiter::completion& done);
  void increment_together(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                          limiter::completion& done, limiter::batch_mode mode);
  // One try of an all-or-nothing batch under the locks of the shards `indexes`; false when the store was
  // full.
  bool apply_together(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                      limiter::batch_mode mode, std::span<const std::size_t> indexes, std::int64_t now);
  void fail_full(limiter::completion& done) const;
  // Drops the shard's expired counters (its lock held); returns how many.
  std::size_t reclaim_locked(shard& s, std::int64_t now);
  // The store is full: sweeps every shard (at most once a second); true when there is room now.
  bool reclaim_everywhere(std::int64_t now);

  const core::clock& clock_;
  std::size_t max_counters_;
  alignas(64) std::atomic<std::size_t> live_{0};  // counters in the tables, expired or not
  alignas(64) std::atomic<std::size_t> next_sweep_{0};
  std::atomic<std::int64_t> last_full_sweep_{0};  // Unix seconds
  std::unique_ptr<shard[]> shards_;               // shard_count of them, on the heap (too large for a stack)
  std::unique_ptr<lease_shard[]> lease_shards_;   // lease_shard_count
};

}  // namespace sluice::ratelimit::backends::memory
