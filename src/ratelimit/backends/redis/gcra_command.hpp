#pragma once
// GCRA on Redis in one plain command, exact and atomic, without a script. The key holds the theoretical
// arrival time (TAT, µs) in 8 bytes, a big-endian integer; BITFIELD works on its low 52 bits (u52 at bit
// offset 12: times up to 2112, and the top bits stay 0, so GET reads the same number). BITFIELD's saturating
// and failing arithmetic on that field does the whole check and change of a request of n hits:
//
//   OVERFLOW SAT  INCRBY u52 12 −now       d = max(TAT − now, 0)                 (the bucket's debt)
//   OVERFLOW FAIL INCRBY u52 12 Δ + M − τ  overflows, and is not applied, exactly when d + Δ > τ
//                 INCRBY u52 12 −(M − τ)   takes the offset off again; below 0 (not applied) after a refusal
//                 INCRBY u52 12 now        back to a time: max(TAT, now) + Δ if admitted, else TAT unchanged
//
// with Δ = n·T (the emission interval T), τ the tolerance (burst·T) and M = 2^52 − 1 (the last INCRBY stays
// below M until 2100: now + τ with τ under 3650 days); negative hits are −now, −Δ, +now, all saturating:
// max(TAT − Δ, now). BITFIELD reads and writes its field a bit at a time, so the narrower field costs Redis
// less. Its cost is still about twice an INCRBY's; a Lua script's is three times as much again.
//
// Every write of a GCRA key (BITFIELD's PEXPIRE, the decide script's SET) gives it the same TTL: the bucket's
// length τ, + 1 ms, + a slack of one second. An admitted request leaves TAT ≤ now + τ, so a key outlives its
// arrival time by at least the slack, and a worker need not refresh the expiry of a key it refreshed less
// than the slack ago (gcra_expiry.hpp): a hot key costs one BITFIELD per decision, and a PEXPIRE a second.

#include <cstdint>
#include <string_view>

#include "ratelimit/limiter/backend.hpp"
#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

inline constexpr std::int64_t gcra_expiry_slack_ms = 1000;

// The TTL every write under `op` gives a GCRA key, in ms: τ (rounded up) + 1 ms + the slack.
std::int64_t gcra_ttl_ms(const limiter::counter_op& op);

// Appends the op's BITFIELD (one reply).
void push_gcra(sluice::redis::request& out, const limiter::counter_op& op);

// Appends the PEXPIRE of gcra_ttl_ms (one reply).
void push_gcra_expiry(sluice::redis::request& out, const limiter::counter_op& op);

// Reads the BITFIELD reply into `out` (the arrival time the op leaves, or would have left), as
// limiter::evaluate computes it. False when the reply is not that command's, or disagrees with it.
bool read_gcra(const sluice::redis::value& reply, const limiter::counter_op& op, limiter::op_result& out);

// The arrival time a GCRA key's value holds (GET's bulk string; a shorter string reads as zero-padded, as
// BITFIELD reads it).
std::uint64_t gcra_time(std::string_view bytes);

}  // namespace sluice::ratelimit::backends::redis
