#pragma once
// GCRA (a token bucket of `burst` tokens refilled one per emission interval T = window / L): with the
// theoretical arrival time TAT, a request of n hits admits when max(TAT, now) + n·T − burst·T ≤ now, and then
// moves TAT there. So `burst` are admitted at once, then one per T; in any interval of length d at most
// burst + d/T. A refund moves TAT back, never before now.

#include <algorithm>
#include <cstdint>

#include "ratelimit/limiter/counter_op.hpp"

namespace sluice::ratelimit::limiter {

// TAT moved on by `hits`. Saturates instead of overflowing: a result this large never admits.
inline std::int64_t gcra_advance(std::int64_t tat, std::uint64_t hits, std::int64_t interval_us) {
  constexpr std::int64_t cap = std::int64_t{1} << 52;
  if (hits != 0 && static_cast<std::uint64_t>(cap) / hits < static_cast<std::uint64_t>(interval_us))
    return cap;
  return std::min(cap, tat + static_cast<std::int64_t>(hits) * interval_us);
}

// Whether the arrival time an op left (or would have left) admits, judging `judged` more hits (a check).
inline bool gcra_admits(const gcra_op& op, std::int64_t now_us, std::uint64_t tat, std::uint64_t judged) {
  const std::int64_t judged_tat = gcra_advance(static_cast<std::int64_t>(tat), judged, op.emission_us);
  return judged_tat - op.tolerance_us <= now_us;
}

// The arrival time after `hits` at `now_us` from `stored` (0: none), or after giving them back (`refund`).
inline std::int64_t gcra_next(const gcra_op& op, std::int64_t now_us, std::uint64_t stored,
                              std::uint64_t hits, bool refund) {
  const std::int64_t tat = std::max(static_cast<std::int64_t>(stored), now_us);
  if (refund) return std::max(tat - gcra_advance(0, hits, op.emission_us), now_us);
  return gcra_advance(tat, hits, op.emission_us);
}

}  // namespace sluice::ratelimit::limiter
