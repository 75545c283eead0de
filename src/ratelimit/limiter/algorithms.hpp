#pragma once
// Any op judged by its algorithm, for the limiter (which turns results into decisions) and the memory store
// (which applies ops). Each algorithm's own arithmetic is in its header: fixed_window.hpp,
// sliding_window.hpp, gcra.hpp, leases.hpp. The Redis script (backends/redis/decide_script_lua.cpp) does the
// same in Lua, in doubles: every quantity here stays far below 2^53 (microseconds until the year 2255), so
// both agree.
//
// `accounting: usage` (counter_op::usage): every op applies, admitted or not, so the counter or arrival time
// runs past the limit and recovers as time passes; an op of 0 hits (a check) admits only when one more hit
// would.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include <boost/container/small_vector.hpp>

#include "ratelimit/limiter/backend.hpp"
#include "ratelimit/limiter/fixed_window.hpp"
#include "ratelimit/limiter/gcra.hpp"
#include "ratelimit/limiter/sliding_window.hpp"

namespace sluice::ratelimit::limiter {

// A usage check (0 hits) is judged as one hit would be; so is a concurrency check (is a slot free?).
inline std::uint64_t judged_hits(const counter_op& op) {
  return (op.usage || op.kind() == op_kind::concurrency) && op.increment == 0 ? 1 : 0;
}

// A concurrency slot is taken or not on its own: every store refuses it in an all-or-nothing batch with this
// error (the batch's ops, when one is there).
inline std::optional<backend_error> refuse_concurrency_all_or_nothing(std::span<const counter_op> ops) {
  if (std::ranges::none_of(ops, [](const counter_op& op) { return op.kind() == op_kind::concurrency; }))
    return std::nullopt;
  return backend_error{
      "algorithm concurrency cannot be counted all-or-nothing: a request with a count_only_admitted rule (or "
      "COUNT_ONLY_ADMITTED=true) matched a concurrency limit",
      true};
}

// The ops batched counting (REDIS_SYNC_INTERVAL) sends to Redis as they come: it keeps no view of them.
inline bool decided_in_store(const counter_op& op) {
  return op.kind() == op_kind::gcra || op.kind() == op_kind::concurrency;
}

// Whether an op admitted, from its result (what evaluate() returned).
inline bool admits(const counter_op& op, const op_result& r) {
  if (op.refund) return true;
  const std::uint64_t judged = judged_hits(op);
  if (const auto* g = op.as<gcra_op>()) return gcra_admits(*g, op.now_us, r.value, judged);
  if (const auto* s = op.as<sliding_window_op>())
    return sliding_window_admits(*s, op.now_us, r.value, r.previous, judged);
  if (const auto* f = op.as<fixed_window_op>()) return fixed_window_admits(*f, r.value, judged);
  return r.value + judged <= op.limit();  // leases: the slots held after the op (leases.hpp)
}

// Whether an op changes the store, once its batch applies: fixed-window counters count every hit (upstream's
// counting), and so does usage accounting; the others only what they admit.
inline bool applies(const counter_op& op, bool admitted) {
  return admitted || op.kind() == op_kind::count || op.usage;
}

// `current` (and `previous`, for sliding) as the store holds them now (a GCRA key: its TAT, 0 when absent).
// Writes what the op leaves in the store were it applied, and returns whether the op admits (a refund always
// does). Not for concurrency ops (leases.hpp).
inline bool evaluate(const counter_op& op, std::uint64_t current, std::uint64_t previous, op_result& out) {
  if (const auto* g = op.as<gcra_op>()) {
    out.value = static_cast<std::uint64_t>(gcra_next(*g, op.now_us, current, op.increment, op.refund));
    return admits(op, out);
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
