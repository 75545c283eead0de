#include <doctest/doctest.h>

#include "tracing/sampler.hpp"

using namespace sluice::tracing;

namespace {

// A trace id whose last 8 bytes are `low` (big-endian).
std::array<std::uint8_t, 16> trace_with_low(std::uint64_t low) {
  std::array<std::uint8_t, 16> id{};
  id[0] = 0xab;
  for (int i = 15; i >= 8; --i, low >>= 8) id[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(low);
  return id;
}

}  // namespace

TEST_CASE(
    "TraceIDRatioBased as OpenTelemetry computes it: the last 8 bytes, shifted right by one, under ratio * "
    "2^63") {
  const sampler half(0.5);
  // The bound is 2^62: (x >> 1) < 2^62 means x < 2^63.
  CHECK(half.ratio_sample(trace_with_low(0x7fffffffffffffffull)));
  CHECK_FALSE(half.ratio_sample(trace_with_low(0x8000000000000000ull)));
  CHECK(sampler(1.0).ratio_sample(trace_with_low(UINT64_MAX)));
  CHECK_FALSE(sampler(0.0).ratio_sample(trace_with_low(0)));
  CHECK(sampler(2.0).ratio_sample(trace_with_low(UINT64_MAX)));  // clamped to 1
  CHECK_FALSE(sampler(-1.0).ratio_sample(trace_with_low(0)));    // clamped to 0
  // Over many ids spread evenly, the share sampled is the ratio.
  const sampler quarter(0.25);
  int sampled = 0;
  for (std::uint64_t i = 0; i < 4000; ++i)
    sampled += quarter.ratio_sample(trace_with_low(i * 4611686018427387ull)) ? 1 : 0;
  CHECK(sampled == doctest::Approx(1000).epsilon(0.01));
}

TEST_CASE(
    "ParentBased: a parent's decision is followed; no parent, or a B3 parent that deferred, uses the ratio") {
  const sampler never(0.0), always(1.0);
  span_context parent;
  parent.sampled = true;
  CHECK(never.sample(parent, trace_with_low(0)));
  parent.sampled = false;
  CHECK_FALSE(always.sample(parent, trace_with_low(0)));
  parent.sampled.reset();  // B3 without a sampling state
  CHECK(always.sample(parent, trace_with_low(0)));
  CHECK_FALSE(never.sample(parent, trace_with_low(0)));
  CHECK(always.sample(std::nullopt, trace_with_low(0)));
  CHECK_FALSE(never.sample(std::nullopt, trace_with_low(0)));
}

TEST_CASE("parent-based or not: always_on and always_off decide for every request") {
  span_context sampled_parent, unsampled_parent;
  sampled_parent.sampled = true;
  unsampled_parent.sampled = false;
  const auto id = trace_with_low(0);
  CHECK(sampler(0.0, true).sample(sampled_parent, id));         // parentbased_always_off follows a parent
  CHECK_FALSE(sampler(0.0, false).sample(sampled_parent, id));  // always_off never records
  CHECK(sampler(1.0, false).sample(unsampled_parent, id));      // always_on always does
  CHECK_FALSE(sampler(1.0, true).sample(unsampled_parent, id));
  CHECK(sampler(1.0, false).sample(std::nullopt, id));
}
