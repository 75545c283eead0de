#pragma once
// The one seam between the backend-independent limiter and a counter store (upstream's DoLimit split in two
// primitive operations). Completion is a callback interface rather than a coroutine so that a store that
// needs no I/O (memory) can finish inline on the caller's thread — a gRPC decision then needs no hop to the
// io_context.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::ratelimit::limiter {

// What an op keeps in the store. The arithmetic of each is in algorithms.hpp; a store that runs it itself
// (Redis, in a script) does the same arithmetic.
enum class op_kind : std::uint8_t {
  count,    // a counter (fixed windows): INCRBY and EXPIRE, whatever the decision (upstream's counting)
  sliding,  // the current window's counter, judged with the previous window's; counts only what it admits
  gcra,     // a theoretical arrival time in microseconds, moved on only when the op admits
  // leases in flight (leases.hpp): per holder when the op is per_holder, else per slice of time; an
  // acquisition when it admits, a release (refund) frees the holder's slots (per slice: the oldest slices)
  concurrency,
};

struct counter_op {
  std::string_view key;
  std::uint64_t increment = 0;
  std::uint32_t ttl_seconds =
      0;                        // window length + jitter; refreshed on every increment, as upstream's EXPIRE
  bool per_second = false;      // the limit's unit is SECOND (a dedicated per-second store may take it)
  std::int64_t window_end = 0;  // count, sliding: when the key's window ends (Unix seconds)
  // Negative hits: subtract `increment` instead, never going below 0, keeping the counter's TTL; a counter
  // that does not exist stays absent (its result is 0). For GCRA: move the arrival time back, not before now.
  bool refund = false;
  op_kind kind = op_kind::count;
  // `accounting: usage`: the hits were spent already, so they always count, whatever the verdict (a sliding
  // window counts past its limit, a GCRA arrival time moves past its tolerance: debt), also in an
  // all-or-nothing batch that does not apply; and an op of 0 hits (a check) is over when no hit is left.
  bool usage = false;
  // The rest is for sliding and GCRA ops, and for every op of an all-or-nothing batch.
  std::string_view previous_key;  // sliding: the previous window's counter
  std::uint64_t limit = 0;        // count, sliding: the most the count may reach
  // sliding: the window's length; gcra: the emission interval; concurrency: a slice's length (leases.hpp),
  // per holder: the lease
  std::int64_t window_us = 0;
  // sliding: when the window began, for a calendar window (config/calendar.hpp); 0 for an epoch-aligned one,
  // which began at now − now % window.
  std::int64_t window_start_us = 0;
  std::int64_t tolerance_us = 0;  // gcra: burst × emission interval; concurrency: the slices a lease spans
  std::int64_t now_us = 0;        // the decision's time
  // concurrency with `holder_key`: the key holds one lease per holder (a store's own type of key), and this
  // op's holder is `holder`; no holder (operator control only) addresses the whole set.
  bool per_holder = false;
  std::optional<std::string_view> holder;
  // All-or-nothing batches apply when the request is admitted, which is what `role` says of this op's
  // admission: see op_role.
  std::uint32_t role = 0;
};

// An op's part in an all-or-nothing batch's verdict (algorithms.hpp, batch_verdict): the batch applies when
// every enforced op admits and, if any op has a quota role, every op of at least one quota descriptor admits
// (the request's answer under quota mode). Advisory ops (shadow-mode limits, or quota descriptors the answer
// no longer depends on) never hold the batch back. When the batch applies, each op is applied as an
// independent one would be: fixed-window counters always, the others when they admit.
namespace op_role {
inline constexpr std::uint32_t enforced = 0;
inline constexpr std::uint32_t advisory = 1;
inline constexpr std::uint32_t first_quota = 2;  // quota descriptor d: first_quota + d
}  // namespace op_role

struct op_result {
  // count, sliding: the counter after the op; gcra: the arrival time after it, were it applied.
  std::uint64_t value = 0;
  std::uint64_t previous = 0;  // sliding: the previous window's count
  std::uint64_t before = 0;    // the counter before the op (Redis scripts: to undo what a refund gave back)
  // concurrency: `value` and `before` are the slots held after and before; these, the acquisitions whose
  // leases ended (dropped by this op) and when the oldest lease still held ends (µs; 0: none).
  std::uint64_t expired = 0;
  std::int64_t oldest_end_us = 0;
  // concurrency per holder: how many holders hold after the op, and what the op's holder held before it.
  std::uint64_t holders = 0;
  std::uint64_t holder_slots = 0;
};

enum class batch_mode : std::uint8_t {
  independent,     // each op on its own: fixed-window counters always count (upstream), others if they admit
  all_or_nothing,  // applied only when the batch's verdict admits (count_only_admitted; see op_role)
  evaluate_only,   // nothing changes (an all-or-nothing request the local cache already knows is over)
};

struct backend_error {
  std::string message;
  // The store answered that it will never take this op (a key that holds something else than a counter):
  // trying again cannot help, unlike a store that cannot be reached.
  bool refused = false;
};

class completion {
 public:
  // Called exactly once per operation, possibly before the operation's call returns. Null means success.
  virtual void complete(const backend_error* error) noexcept = 0;

 protected:
  ~completion() = default;
};

// The span upstream records around a store's round trip (reference §1.9): its name and counts.
struct trace_description {
  const char* name = nullptr;  // null: no span (a store without I/O)
  std::array<std::pair<const char*, std::int64_t>, 2> counts{};
  std::size_t count_size = 0;
};

class backend {
 public:
  virtual ~backend() = default;
  // What tracing records around increment(ops): upstream's span for this store.
  virtual trace_description describe_for_trace(std::span<const counter_op> /*ops*/) const { return {}; }
  // Applies ops as `mode` says and writes each op's result to results[i]: what the store holds after it, or
  // would hold had it been applied (all-or-nothing batches and GCRA ops that do not admit). Each op is atomic
  // on its keys; an all-or-nothing batch is atomic as a whole. The spans stay valid until done.complete().
  virtual void increment(std::span<const counter_op> ops, std::span<op_result> results, completion& done,
                         batch_mode mode) = 0;
  // Writes the current value of each counter (0 when absent) to results[i].value; used before incrementing
  // when STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is on.
  virtual void get(std::span<const counter_op> ops, std::span<op_result> results, completion& done) = 0;

  // Operator control (the counters API, explain). Reads what each op's keys hold now and changes nothing:
  // results[i].value is count: the counter; sliding: the counter, with the previous window's in `previous`;
  // gcra: the arrival time, not before the op's now_us; concurrency: the slots held (leases ended dropped)
  // and `oldest_end_us` (per holder: also `holders`, and `holder_slots` of the op's holder). `before` is the
  // store's own value; a store that counts hits before it sends them (batched counting) adds this worker's
  // unsent hits to `value` only.
  virtual void inspect(std::span<const counter_op> ops, std::span<op_result> results, completion& done) = 0;
  // Operator control: leaves each op's keys holding `increment` — count, sliding: the counter (a sliding
  // window's previous counter is deleted); gcra: the arrival time in µs; concurrency: that many slots, as
  // one acquisition now (per holder: the op's holder holds that many; without a holder only 0, which frees
  // every holder). 0 deletes the keys (per holder: frees the op's holder alone). Counters get the op's TTL. A
  // store that keeps a worker's view (batched counting) forgets this worker's unsent hits and view of them.
  virtual void overwrite(std::span<const counter_op> ops, completion& done) = 0;
};

}  // namespace sluice::ratelimit::limiter
