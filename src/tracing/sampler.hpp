#pragma once
// Whether a request's spans are recorded: upstream's ParentBased(TraceIDRatioBased(TRACING_SAMPLING_RATE))
// (reference §1.9). A parent that decided is followed; a request without one (or a B3 parent that deferred
// its decision, which B3 leaves to the receiver) is sampled when its trace id falls under the ratio, exactly
// as OpenTelemetry computes it, so every service of a trace with the same ratio decides the same.

#include <array>
#include <cstdint>
#include <optional>

#include "tracing/propagation.hpp"

namespace sluice::tracing {

class sampler {
 public:
  // `ratio` from 0 (never) to 1 (always); outside, clamped. Parent-based (upstream's, and every
  // OTEL_TRACES_SAMPLER=parentbased_*): a parent's decision is followed; else (always_on, always_off,
  // traceidratio) the ratio decides for every request.
  explicit sampler(double ratio, bool parent_based = true);

  bool sample(const std::optional<span_context>& parent, const std::array<std::uint8_t, 16>& trace_id) const;
  // TraceIDRatioBased alone: the trace id's last 8 bytes, big-endian, shifted right by one, under ratio *
  // 2^63.
  bool ratio_sample(const std::array<std::uint8_t, 16>& trace_id) const;
  // A request without a parent is never sampled (a rate of 0): its trace id need not even be made.
  bool samples_no_root() const { return bound_ == 0; }

 private:
  std::uint64_t bound_;
  bool parent_based_;
};

}  // namespace sluice::tracing
