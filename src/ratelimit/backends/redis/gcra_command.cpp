#include "ratelimit/backends/redis/gcra_command.hpp"

#include "core/strings.hpp"
#include "ratelimit/limiter/algorithms.hpp"

namespace sluice::ratelimit::backends::redis {

namespace {

constexpr std::int64_t field_max = (std::int64_t{1} << 52) - 1;  // M

}  // namespace

std::int64_t gcra_ttl_ms(const limiter::counter_op& op) {
  return (std::get<limiter::gcra_op>(op.algorithm).tolerance_us + 999) / 1000 + 1 + gcra_expiry_slack_ms;
}

void push_gcra(sluice::redis::request& out, const limiter::counter_op& op) {
  // Δ and τ stay below 2^52 (gcra_advance's cap; bursts are refused at load beyond 3650 days), so the offset
  // Δ + M − τ fits in INCRBY's signed 64 bits. The last INCRBY cannot overflow: it needs no OVERFLOW of its
  // own.
  const auto& gcra = std::get<limiter::gcra_op>(op.algorithm);
  const std::int64_t delta = limiter::gcra_advance(0, op.increment, gcra.emission_us);
  const core::decimal minus_now(-op.now_us), now(op.now_us);
  if (op.refund) {
    const core::decimal minus_delta(-delta);
    out.push({"BITFIELD", op.key, "OVERFLOW", "SAT", "INCRBY", "u52", "12", minus_now.text(), "INCRBY", "u52",
              "12", minus_delta.text(), "INCRBY", "u52", "12", now.text()});
  } else {
    const core::decimal offset(delta + field_max - gcra.tolerance_us), back(-(field_max - gcra.tolerance_us));
    out.push({"BITFIELD", op.key,      "OVERFLOW", "SAT", "INCRBY", "u52",         "12",     minus_now.text(),
              "OVERFLOW", "FAIL",      "INCRBY",   "u52", "12",     offset.text(), "INCRBY", "u52",
              "12",       back.text(), "INCRBY",   "u52", "12",     now.text()});
  }
}

void push_gcra_expiry(sluice::redis::request& out, const limiter::counter_op& op) {
  const core::decimal ttl_ms(gcra_ttl_ms(op));
  out.push({"PEXPIRE", op.key, ttl_ms.text()});
}

bool read_gcra(const sluice::redis::value& reply, const limiter::counter_op& op, limiter::op_result& out) {
  using kind = sluice::redis::value::kind;
  const auto& e = reply.elements;
  if (reply.type != kind::array || e.size() != (op.refund ? 3u : 4u) || e[0].type != kind::integer ||
      e[0].integer < 0 || e[0].integer > field_max)
    return false;
  // The first field is the debt d = max(TAT − now, 0), so max(TAT, now) = now + d.
  const bool admitted = limiter::evaluate(op, static_cast<std::uint64_t>(op.now_us + e[0].integer), 0, out);
  const auto& last = e.back();
  if (last.type != kind::integer) return false;
  if (op.refund) return last.integer == static_cast<std::int64_t>(out.value);
  // Applied or not as Redis did it, leaving the arrival time it should (a refused request leaves max(TAT,
  // now)).
  const std::int64_t left = admitted ? static_cast<std::int64_t>(out.value) : op.now_us + e[0].integer;
  return e[1].type == (admitted ? kind::integer : kind::null) && last.integer == left;
}

std::uint64_t gcra_time(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i)
    v = v << 8 | (i < bytes.size() ? static_cast<unsigned char>(bytes[i]) : 0);
  return v & static_cast<std::uint64_t>(field_max);  // BITFIELD's u52 at offset 12
}

}  // namespace sluice::ratelimit::backends::redis
