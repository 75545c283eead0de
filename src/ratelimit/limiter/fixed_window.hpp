#pragma once
// Fixed windows (upstream's algorithm): a counter per window, incremented by every request's hits whatever
// the decision, and over once it passes the limit. Windows are aligned to the epoch (or to a calendar zone's
// boundaries: config/calendar.hpp); within an instant at each boundary up to 2L are admitted.

#include <cstdint>

#include "ratelimit/limiter/counter_op.hpp"

namespace sluice::ratelimit::limiter {

// Whether a fixed window's counter at `after` (the op applied) admits, judging `judged` more hits (a check).
inline bool fixed_window_admits(const fixed_window_op& op, std::uint64_t after, std::uint64_t judged) {
  return after + judged <= op.limit;
}

}  // namespace sluice::ratelimit::limiter
