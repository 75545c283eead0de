#pragma once
// Sliding window (the weighted counter production CDNs use): a request is within its limit L when
//   ceil(previous × (W − elapsed) / W) + current ≤ L
// where `previous` is the last window's count and `elapsed` the time since the current window began. Bound:
// in any interval of length d ≤ W, at most L × (1 + d/W) requests are admitted (2L only when the previous
// window's requests all came at its very end); for traffic spread evenly it is about L. Fixed windows admit
// 2L within an instant at each boundary.

#include <cmath>
#include <cstdint>
#include <string_view>

#include "ratelimit/limiter/counter_op.hpp"

namespace sluice::ratelimit::limiter {

// The current window's start: a calendar window's, or the epoch-aligned one's.
inline std::int64_t sliding_start(const sliding_window_op& op, std::int64_t now_us) {
  return op.window_start_us != 0 ? op.window_start_us : now_us - now_us % op.window_us;
}

// The previous window's count, weighted by how much of it the sliding window still covers at `now_us`.
inline std::uint64_t sliding_weighted_previous(std::uint64_t previous, const sliding_window_op& op,
                                               std::int64_t now_us) {
  const std::int64_t elapsed = now_us - sliding_start(op, now_us);
  return static_cast<std::uint64_t>(
      std::ceil(static_cast<double>(previous) * static_cast<double>(op.window_us - elapsed) /
                static_cast<double>(op.window_us)));
}

// A sliding window's previous key; empty for an op of another algorithm.
inline std::string_view previous_key_of(const counter_op& op) {
  const auto* sliding = op.as<sliding_window_op>();
  return sliding != nullptr ? sliding->previous_key : std::string_view();
}

// Whether the current window's counter at `after` (the op applied) admits, judging `judged` more hits.
inline bool sliding_window_admits(const sliding_window_op& op, std::int64_t now_us, std::uint64_t after,
                                  std::uint64_t previous, std::uint64_t judged) {
  return after + judged + sliding_weighted_previous(previous, op, now_us) <= op.limit;
}

}  // namespace sluice::ratelimit::limiter
