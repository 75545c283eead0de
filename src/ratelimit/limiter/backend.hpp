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

#include "ratelimit/limiter/counter_op.hpp"

namespace sluice::ratelimit::limiter {

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
  // The store may have applied the ops before the failure (a reply lost, an error reply to one of several):
  // false only when it certainly did not (the request was never sent).
  bool maybe_applied = true;
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
