#include "tracing/sampler.hpp"

#include <algorithm>
#include <cmath>

namespace sluice::tracing {

sampler::sampler(double ratio, bool parent_based) : parent_based_(parent_based) {
  ratio = std::isnan(ratio) ? 0.0 : std::clamp(ratio, 0.0, 1.0);
  // OpenTelemetry: fraction >= 1 samples everything; else the bound is uint64(fraction * 2^63).
  bound_ = ratio >= 1.0 ? UINT64_MAX : static_cast<std::uint64_t>(ratio * 9223372036854775808.0);
}

bool sampler::ratio_sample(const std::array<std::uint8_t, 16>& trace_id) const {
  if (bound_ == UINT64_MAX) return true;
  std::uint64_t x = 0;
  for (std::size_t i = 8; i < 16; ++i) x = (x << 8) | trace_id[i];
  return (x >> 1) < bound_;
}

bool sampler::sample(const std::optional<span_context>& parent,
                     const std::array<std::uint8_t, 16>& trace_id) const {
  if (parent_based_ && parent && parent->sampled) return *parent->sampled;
  return ratio_sample(trace_id);
}

}  // namespace sluice::tracing
