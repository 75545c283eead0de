#pragma once
// GCRA on Redis in one plain command, exact and atomic, without a script. The key holds the theoretical
// arrival time (TAT, µs) as BITFIELD's unsigned 62-bit field at bit offset 2: 8 bytes, a big-endian integer.
// BITFIELD's saturating and failing arithmetic on that field does the whole check and change of a request of
// n hits:
//
//   OVERFLOW SAT  INCRBY u62 2 −now       d = max(TAT − now, 0)                 (the bucket's debt)
//   OVERFLOW FAIL INCRBY u62 2 Δ + M − τ  overflows, and is not applied, exactly when d + Δ > τ
//                 INCRBY u62 2 −(M − τ)   takes the offset off again; below 0 (not applied) after a refusal
//   OVERFLOW SAT  INCRBY u62 2 now        back to a time: max(TAT, now) + Δ if admitted, else TAT unchanged
//
// with Δ = n·T (the emission interval T), τ the tolerance (burst·T) and M = 2^62 − 1; negative hits are
// −now, −Δ, +now, all saturating: max(TAT − Δ, now). A PEXPIRE of τ (+1 ms) follows in the same pipeline: an
// admitted request leaves TAT ≤ now + τ, so the key outlives its arrival time. BITFIELD's bit-by-bit field
// access costs Redis about twice an INCRBY; a Lua script costs it three times as much again.

#include <cstdint>
#include <string_view>

#include "ratelimit/limiter/backend.hpp"
#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

// Appends the op's BITFIELD and PEXPIRE (two replies).
void push_gcra(sluice::redis::request& out, const limiter::counter_op& op);

// Reads the BITFIELD reply into `out` (the arrival time the op leaves, or would have left), as
// limiter::evaluate computes it. False when the reply is not that command's, or disagrees with it.
bool read_gcra(const sluice::redis::value& reply, const limiter::counter_op& op, limiter::op_result& out);

// The arrival time a GCRA key's value holds (GET's bulk string; a shorter string reads as zero-padded, as
// BITFIELD reads it).
std::uint64_t gcra_time(std::string_view bytes);

}  // namespace sluice::ratelimit::backends::redis
