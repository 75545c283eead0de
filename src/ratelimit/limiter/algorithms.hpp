#pragma once
// The arithmetic of each op kind, shared by the limiter (which turns results into decisions) and the memory
// store (which applies ops). The Redis script (backends/redis/decide_script.hpp) does the same in Lua, in
// doubles: every quantity here stays far below 2^53 (microseconds until the year 2255), so both agree.
//
// Sliding window (the weighted counter production CDNs use): a request is within its limit L when
//   ceil(previous × (W − elapsed) / W) + current ≤ L
// where `previous` is the last window's count and `elapsed` the time since the current window began. Bound:
// in any interval of length d ≤ W, at most L × (1 + d/W) requests are admitted (2L only when the previous
// window's requests all came at its very end); for traffic spread evenly it is about L. Fixed windows admit
// 2L within an instant at each boundary.
//
// GCRA (a token bucket of `burst` tokens refilled one per emission interval T = window / L): with the
// theoretical arrival time TAT, a request of n hits admits when max(TAT, now) + n·T − burst·T ≤ now, and then
// moves TAT there. So `burst` are admitted at once, then one per T; in any interval of length d at most
// burst + d/T.
//
// `accounting: usage` (counter_op::usage): every op applies, admitted or not, so the counter or arrival time
// runs past the limit and recovers as time passes; an op of 0 hits (a check) admits only when one more hit
// would.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include <boost/container/small_vector.hpp>

#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::limiter {

// Saturates instead of overflowing: a result this large never admits.
inline std::int64_t gcra_advance(std::int64_t tat, std::uint64_t hits, std::int64_t interval_us) {
  constexpr std::int64_t cap = std::int64_t{1} << 52;
  if (hits != 0 && static_cast<std::uint64_t>(cap) / hits < static_cast<std::uint64_t>(interval_us))
    return cap;
  return std::min(cap, tat + static_cast<std::int64_t>(hits) * interval_us);
}

// The current window's start: a calendar window's, or the epoch-aligned one's.
inline std::int64_t sliding_start(const counter_op& op) {
  return op.window_start_us != 0 ? op.window_start_us : op.now_us - op.now_us % op.window_us;
}

inline std::uint64_t sliding_weighted_previous(std::uint64_t previous, const counter_op& op) {
  const std::int64_t window_us = op.window_us;
  const std::int64_t elapsed = op.now_us - sliding_start(op);
  return static_cast<std::uint64_t>(
      std::ceil(static_cast<double>(previous) * static_cast<double>(window_us - elapsed) /
                static_cast<double>(window_us)));
}

// A usage check (0 hits) is judged as one hit would be; so is a concurrency check (is a slot free?).
inline std::uint64_t judged_hits(const counter_op& op) {
  return (op.usage || op.kind == op_kind::concurrency) && op.increment == 0 ? 1 : 0;
}

// A concurrency slot is taken or not on its own: every store refuses it in an all-or-nothing batch with this
// error (the batch's ops, when one is there).
inline std::optional<backend_error> refuse_concurrency_all_or_nothing(std::span<const counter_op> ops) {
  if (std::ranges::none_of(ops, [](const counter_op& op) { return op.kind == op_kind::concurrency; }))
    return std::nullopt;
  return backend_error{
      "algorithm concurrency cannot be counted all-or-nothing: a request with a count_only_admitted rule (or "
      "COUNT_ONLY_ADMITTED=true) matched a concurrency limit",
      true};
}

// The ops batched counting (REDIS_SYNC_INTERVAL) sends to Redis as they come: it keeps no view of them.
inline bool decided_in_store(const counter_op& op) {
  return op.kind == op_kind::gcra || op.kind == op_kind::concurrency;
}

// Whether a GCRA op admitted, from the arrival time it left (or would have left).
inline bool gcra_admits(const counter_op& op, std::uint64_t tat) {
  if (op.refund) return true;
  const std::int64_t judged = gcra_advance(static_cast<std::int64_t>(tat), judged_hits(op), op.window_us);
  return judged - op.tolerance_us <= op.now_us;
}

// Whether an op admitted, from its result (what evaluate() returned).
inline bool admits(const counter_op& op, const op_result& r) {
  if (op.refund) return true;
  if (op.kind == op_kind::gcra) return gcra_admits(op, r.value);
  const std::uint64_t weighted = op.kind == op_kind::sliding ? sliding_weighted_previous(r.previous, op) : 0;
  return r.value + judged_hits(op) + weighted <= op.limit;
}

// Whether an op changes the store, once its batch applies: fixed-window counters count every hit (upstream's
// counting), and so does usage accounting; the others only what they admit.
inline bool applies(const counter_op& op, bool admitted) {
  return admitted || op.kind == op_kind::count || op.usage;
}

// `current` (and `previous`, for sliding) as the store holds them now (a GCRA key: its TAT, 0 when absent).
// Writes what the op leaves in the store were it applied, and returns whether the op admits (a refund always
// does).
inline bool evaluate(const counter_op& op, std::uint64_t current, std::uint64_t previous, op_result& out) {
  if (op.kind == op_kind::gcra) {
    const std::int64_t tat = std::max(static_cast<std::int64_t>(current), op.now_us);
    if (op.refund) {
      const std::int64_t back = gcra_advance(0, op.increment, op.window_us);
      out.value = static_cast<std::uint64_t>(std::max(tat - back, op.now_us));
      return true;
    }
    const std::int64_t next = gcra_advance(tat, op.increment, op.window_us);
    out.value = static_cast<std::uint64_t>(next);
    return gcra_admits(op, out.value);
  }
  out.previous = previous;
  if (op.refund) {
    out.value = current - std::min(current, op.increment);
    return true;
  }
  out.value = current + op.increment;
  return admits(op, out);
}

// The verdict of an all-or-nothing batch (see op_role): fed each op's admission, in any order.
class batch_verdict {
 public:
  void add(const counter_op& op, bool admitted) {
    if (op.role == op_role::enforced) {
      enforced_ok_ = enforced_ok_ && admitted;
    } else if (op.role >= op_role::first_quota) {
      auto it = std::find_if(quota_.begin(), quota_.end(), [&](const auto& q) { return q.first == op.role; });
      if (it == quota_.end()) {
        quota_.emplace_back(op.role, admitted);
      } else {
        it->second = it->second && admitted;
      }
    }
  }
  bool applies() const {
    return enforced_ok_ && (quota_.empty() || std::any_of(quota_.begin(), quota_.end(),
                                                          [](const auto& q) { return q.second; }));
  }

 private:
  bool enforced_ok_ = true;
  boost::container::small_vector<std::pair<std::uint32_t, bool>, 4> quota_;  // (role, every op admitted)
};

}  // namespace sluice::ratelimit::limiter
