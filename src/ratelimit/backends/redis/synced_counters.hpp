#pragma once
// REDIS_SYNC_INTERVAL's view of one worker's counters: per key, the global value Redis last returned plus
// this worker's hits since, from which it decides without asking Redis (synced_backend.hpp sends the hits in
// batches and reads keys it does not know). No I/O and no locks: one worker's table, used on its thread.
//
// A counter is read from Redis (its first op goes there, as without batching) before it is decided locally,
// and read again when Redis has not answered for it for an interval and it holds nothing unsent: so a view
// decided from is at most two intervals and a round trip old (docs/concepts/batched-counting.md). A counter
// over its limit stops counting until its window ends (upstream's local over-limit cache): no more Redis
// traffic for it.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::backends::redis {

struct synced_counter {
  std::string_view key;        // its table's key
  std::uint64_t base = 0;      // the value Redis last returned
  std::int64_t in_flight = 0;  // hits (negative: given back) in a flush not answered yet
  std::int64_t pending = 0;    // hits since, not sent yet
  // Hits given back beyond the view (which can lag others' flushes): not sent yet, and in a flush not
  // answered yet. Redis takes them from what it holds above their `seen` (unseen_refund_script): the value
  // this worker's view counted on there when it gave them back (of refunds merged, the highest: a later view
  // gave back from more of the others' hits already; stricter, never looser).
  std::uint64_t beyond = 0;
  std::uint64_t beyond_seen = 0;
  std::uint64_t beyond_in_flight = 0;
  std::uint64_t beyond_in_flight_seen = 0;
  std::uint64_t previous = 0;     // sliding windows: the previous window's count, as last read
  std::int64_t read_at_us = 0;    // when Redis last answered for it (0: never)
  std::int64_t window_end = 0;    // Unix seconds: then it may go, once it holds nothing unsent
  std::uint32_t ttl_seconds = 0;  // the last op's EXPIRE
  bool per_second = false;
  bool reading = false;          // an op of it is in Redis now: other ops wait for the answer
  bool flushing = false;         // in_flight is in a flush
  bool dirty = false;            // listed for the next flush
  bool over = false;             // over its limit: later hits are not counted
  std::uint64_t over_limit = 0;  // the limit it went over (a higher one is not "over")

  // What this worker believes Redis holds once everything it counted has arrived.
  std::uint64_t view() const {
    const std::int64_t v = static_cast<std::int64_t>(base) + in_flight + pending;
    return v > 0 ? static_cast<std::uint64_t>(v) : 0;
  }
};

class synced_counters {
 public:
  // `fresh_us`: how long a value read from Redis may be decided from.
  synced_counters(std::size_t max_keys, std::int64_t fresh_us) : max_keys_(max_keys), fresh_us_(fresh_us) {}

  enum class route : std::uint8_t {
    local,  // decide() now
    read,   // send the op to Redis; then read_answered() or read_failed()
    wait,   // another op of this counter is in Redis: decide() once it is answered
    full,   // the table holds max_keys counters: the op goes to Redis on its own
  };
  struct routed {
    synced_counter* counter = nullptr;  // null when full
    route how = route::full;
  };
  // Finds (or adds) the op's counter and says what to do with the op at `now_us` (the clock read answers are
  // timed with). While `redis_failing`, a stale counter is decided from what it holds instead of being read
  // again.
  routed find(const limiter::counter_op& op, std::int64_t now_us, bool redis_failing);
  // The op's counter when its view may be decided from now (known, fresh or nothing to read again), else
  // null.
  synced_counter* usable(const limiter::counter_op& op, std::int64_t now_us, bool redis_failing);

  // Decides the op from the counter's view and counts its hits there, as Redis would have: writes the op's
  // result.
  void decide(synced_counter& c, const limiter::counter_op& op, limiter::op_result& out);
  // The op sent for route::read was applied by Redis with result `r`.
  void read_answered(synced_counter& c, const limiter::counter_op& op, const limiter::op_result& r,
                     std::int64_t now_us);
  // It failed: the op is decided from what the counter holds (nothing, for a new one); its hits are counted
  // there (should Redis have applied it, twice: stricter). A refund Redis may have applied (`maybe_applied`)
  // is not counted: given back twice would be looser.
  void read_failed(synced_counter& c, const limiter::counter_op& op, limiter::op_result& out,
                   bool maybe_applied);
  // Redis refused it for good: the op failed, and the next op of the counter is read again.
  void read_refused(synced_counter& c);
  // An all-or-nothing (or evaluate-only) batch was answered by Redis: the hits it counted on counters held
  // here go into their views.
  void add_applied(std::span<const limiter::counter_op> ops, std::span<const limiter::op_result> results,
                   bool evaluated_only);

  // A counter's unsent hits, handed to a flush.
  struct flush_item {
    std::string_view key;
    synced_counter* counter;
    std::int64_t hits;     // negative: given back
    std::uint64_t beyond;  // given back beyond the view: sent first, taken from what Redis holds above `seen`
    std::uint64_t seen;    // the counter's value in Redis as this worker last saw it
  };
  // Moves every counter's unsent hits in flight (but for counters with an op or a flush in Redis already).
  void take_flush(std::vector<flush_item>& out);
  // Redis answered a flush with the counter's value.
  void flush_answered(synced_counter& c, std::uint64_t value, std::int64_t now_us);
  // The flush failed: its hits are unsent again (sent with the next flush: should Redis have run it, they
  // count twice, stricter). When Redis may have run it (`maybe_run`), what it gave back is not sent again:
  // given back twice would be looser; not given back at all, should it not have run, is stricter.
  void flush_failed(synced_counter& c, bool maybe_run);
  // The flush's hits can never be sent (Redis refused the key): they are given up, and the counter is read
  // again before its next decision.
  void flush_refused(synced_counter& c);

  // Operator control: the hits counted here on `key` and not sent yet (0 for a counter not held).
  std::int64_t pending_of(std::string_view key) const;
  // Operator control: the store now holds `value` under `key`; what this worker had not sent is given up, and
  // the counter is read again before its next decision.
  void overwritten(std::string_view key, std::uint64_t value);

  // Forgets counters whose window ended before `now_seconds` and that hold nothing unsent.
  std::size_t sweep(std::int64_t now_seconds);

  std::size_t size() const { return table_.size(); }
  // Hits counted here (or given back) that Redis has not acknowledged, flushes in flight included.
  std::int64_t unsent() const { return unsent_; }
  std::size_t dirty() const { return dirty_.size(); }

 private:
  using table = std::unordered_map<std::string, synced_counter, config::string_hash, std::equal_to<>>;
  bool decidable(const synced_counter& c, const limiter::counter_op& op, std::int64_t now_us,
                 bool redis_failing) const;
  void set_unsent(synced_counter& c, std::int64_t pending, std::int64_t in_flight, std::uint64_t beyond,
                  std::uint64_t beyond_in_flight);
  void count(synced_counter& c, std::int64_t hits);
  void mark_dirty(synced_counter& c);
  void unsend_seen(synced_counter& c);

  std::size_t max_keys_;
  std::int64_t fresh_us_;
  table table_;
  std::vector<synced_counter*> dirty_;  // in table_'s nodes, which never move
  // Every counter under the second its window ends (sweep() is the only place counters are erased).
  std::map<std::int64_t, std::vector<synced_counter*>> by_end_;
  std::int64_t unsent_ = 0;
};

}  // namespace sluice::ratelimit::backends::redis
