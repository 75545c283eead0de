// Sizing a client's share as an assignment (assignment.hpp): a token bucket whose burst plus refill over any
// window of the rule stays within the share (a share under 100 per window: one request over it at most),
// requests per time unit, deny-all for no share, and the proto.

#include "ratelimit/rlqs/assignment.hpp"

#include <doctest/doctest.h>

#include <random>

#include "rlqs.pb.h"

namespace rlqs = sluice::ratelimit::rlqs;
using sluice::ratelimit::config::unit;
using action =
    envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction;
using envoy::type::v3::RateLimitStrategy;

namespace {

rlqs::budget per(std::uint64_t requests, unit u, std::uint32_t multiplier = 1) {
  return {requests, sluice::ratelimit::config::unit_seconds(u) * multiplier, u, multiplier};
}

}  // namespace

TEST_CASE("size_assignment: a per-second budget") {
  // 100/s, a share of 50/s: share per window (1 s) = 50; floor(50 × 0.01) = floor(0.5) = 0, under one token
  // (a share under 100 per window): max_tokens 1 and the whole refill; fill_seconds = max(1, 60) = 60;
  // tokens_per_fill = floor(50 / 1 × 60) = 3000 (50/s): 1 + 50 = 51 per window, one over the share.
  auto a = rlqs::size_assignment(50, per(100, unit::second), rlqs::strategy::token_bucket);
  CHECK(a.what == rlqs::assignment::kind::token_bucket);
  CHECK(a.max_tokens == 1);
  CHECK(a.fill_seconds == 60);
  CHECK(a.tokens_per_fill == 3000);
  CHECK(a.rate == doctest::Approx(50.0));

  // A share of 1000/s: max_tokens = floor(1000 × 0.01) = 10; tokens_per_fill = floor((1000 - 10) × 60) =
  // floor(990 × 60) = 59400.
  a = rlqs::size_assignment(1000, per(5000, unit::second), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 10);
  CHECK(a.fill_seconds == 60);
  CHECK(a.tokens_per_fill == 59400);

  // A share of 2.5/s: floor(2.5 × 0.01) = 0, under one token: a burst of 1 and the whole refill,
  // tokens_per_fill = floor(2.5 × 60) = 150.
  a = rlqs::size_assignment(2.5, per(10, unit::second), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 1);
  CHECK(a.tokens_per_fill == 150);
}

TEST_CASE("size_assignment: a per-minute and a per-hour budget") {
  // 60 per minute, a share of 1/s: share per window (60 s) = 60; floor(60 × 0.01) = floor(0.6) = 0, under
  // one token: max_tokens 1 and the whole refill; fill_seconds = max(60, 60) = 60;
  // tokens_per_fill = floor(60 / 60 × 60) = 60 (1 + 60 = 61 per window: one over the share).
  auto a = rlqs::size_assignment(1, per(60, unit::minute), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 1);
  CHECK(a.fill_seconds == 60);
  CHECK(a.tokens_per_fill == 60);

  // Half of it (0.5/s): share 30; floor(30 × 0.01) = floor(0.3) = 0, under one token: max_tokens 1 and the
  // whole refill,
  // tokens_per_fill = 30.
  a = rlqs::size_assignment(0.5, per(60, unit::minute), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 1);
  CHECK(a.tokens_per_fill == 30);
  CHECK(a.rate == doctest::Approx(30.0 / 60));

  // 3600 per hour, a share of 0.25/s: share 900; max_tokens = floor(900 × 0.01) = 9; fill_seconds = 3600;
  // tokens_per_fill = floor((900 - 9) / 3600 × 3600) = 891.
  a = rlqs::size_assignment(0.25, per(3600, unit::hour), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 9);
  CHECK(a.fill_seconds == 3600);
  CHECK(a.tokens_per_fill == 891);

  // A window of 5 minutes (unit_multiplier 5), a share of 1/s: share 300; max_tokens = floor(300 × 0.01) = 3;
  // fill 300 s; tokens_per_fill = floor((300 - 3) / 300 × 300) = 297.
  a = rlqs::size_assignment(1, per(600, unit::minute, 5), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 3);
  CHECK(a.fill_seconds == 300);
  CHECK(a.tokens_per_fill == 297);
}

TEST_CASE(
    "size_assignment: burst + refill over a window stay within the share, +1 under 100 a window (random "
    "shares)") {
  std::mt19937_64 rng(20240607);
  const rlqs::budget budgets[] = {per(100, unit::second),     per(7, unit::second),  per(60, unit::minute),
                                  per(1000, unit::minute, 5), per(3600, unit::hour), per(50000, unit::day)};
  for (const auto& b : budgets) {
    const double window = static_cast<double>(b.window_seconds);
    // Shares from one request per window up to the whole budget (and beyond, for a fleet-wide budget).
    std::uniform_real_distribution<double> share_rate(1.0 / window, 3 * b.rate() + 1.0 / window);
    for (int i = 0; i < 2000; ++i) {
      const double s = share_rate(rng);
      const auto a = rlqs::size_assignment(s, b, rlqs::strategy::token_bucket);
      CAPTURE(b.window_seconds);
      CAPTURE(s);
      REQUIRE(a.what == rlqs::assignment::kind::token_bucket);
      CHECK(a.max_tokens >= 1);
      CHECK(a.fill_seconds >= 60);
      CHECK(a.fill_seconds >= b.window_seconds);
      // max_tokens + tokens_per_fill / fill_seconds × window <= share × window; a share under 100 per window
      // (share × 0.01 < 1: no whole token of burst in it) may go one over.
      const double admitted = a.max_tokens + static_cast<double>(a.tokens_per_fill) / a.fill_seconds * window;
      const double allowance = s * window * rlqs::burst_fraction < 1 ? 1.0 : 0.0;
      CHECK(admitted <= s * window * (1 + 1e-12) + allowance);
      // ...and the rounding loses less than one token per fill interval plus the burst's flooring.
      CHECK(admitted > s * window - window / a.fill_seconds - 1.0);
    }
  }
}

TEST_CASE("size_assignment: small shares keep their whole refill (a rule of 1 per minute still refills)") {
  // 1 per minute, the whole share: floor(1 × 0.01) = 0, so max_tokens 1 and tokens_per_fill 1 per 60 s
  // (deducting the burst would leave 0).
  auto a = rlqs::size_assignment(1.0 / 60, per(1, unit::minute), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 1);
  CHECK(a.tokens_per_fill == 1);
  CHECK(a.fill_seconds == 60);
  // Under one request per window: 0.5 per minute, tokens_per_fill floor(0.5) = 0.
  a = rlqs::size_assignment(0.5 / 60, per(60, unit::minute), rlqs::strategy::token_bucket);
  CHECK(a.max_tokens == 1);
  CHECK(a.tokens_per_fill == 0);
}

TEST_CASE("size_assignment: no share is deny-all") {
  for (auto s : {rlqs::strategy::token_bucket, rlqs::strategy::requests_per_time_unit}) {
    CHECK(rlqs::size_assignment(0, per(60, unit::minute), s).what == rlqs::assignment::kind::deny_all);
    CHECK(rlqs::size_assignment(-1, per(60, unit::minute), s).what == rlqs::assignment::kind::deny_all);
  }
}

TEST_CASE("size_assignment: requests per time unit") {
  // 7.9/s of a per-second rule: floor(7.9 × 1) = 7 per SECOND.
  auto a = rlqs::size_assignment(7.9, per(10, unit::second), rlqs::strategy::requests_per_time_unit);
  CHECK(a.what == rlqs::assignment::kind::requests_per_time_unit);
  CHECK(a.time_unit == unit::second);
  CHECK(a.requests_per_time_unit == 7);
  CHECK(a.rate == 7);
  // 0.5/s of a per-minute rule: 30 per MINUTE.
  a = rlqs::size_assignment(0.5, per(60, unit::minute), rlqs::strategy::requests_per_time_unit);
  CHECK(a.time_unit == unit::minute);
  CHECK(a.requests_per_time_unit == 30);
  CHECK(a.rate == doctest::Approx(0.5));
  // A weekly rule is given per day (RateLimitUnit has no WEEK): 0.125/s × 86400 = 10800 per DAY.
  a = rlqs::size_assignment(0.125, per(100000, unit::week), rlqs::strategy::requests_per_time_unit);
  CHECK(a.time_unit == unit::day);
  CHECK(a.requests_per_time_unit == 10800);
  CHECK(a.rate == doctest::Approx(0.125));
}

TEST_CASE("same_action compares the action, not the rate") {
  auto a = rlqs::size_assignment(0.5, per(60, unit::minute), rlqs::strategy::token_bucket);
  auto b = a;
  b.rate = 123;
  CHECK(a.same_action(b));
  b.tokens_per_fill += 1;
  CHECK_FALSE(a.same_action(b));
}

TEST_CASE("to_proto: the strategy and the time to live") {
  SUBCASE("a token bucket") {
    // 60 per minute, share 1/s = 60 per window, under 100: {max_tokens 1, tokens_per_fill 60 (the whole
    // share), fill_interval 60 s}.
    action out;
    rlqs::to_proto(rlqs::size_assignment(1, per(60, unit::minute), rlqs::strategy::token_bucket), 15, out);
    CHECK(out.assignment_time_to_live().seconds() == 15);
    CHECK(out.assignment_time_to_live().nanos() == 0);
    REQUIRE(out.rate_limit_strategy().strategy_case() == RateLimitStrategy::kTokenBucket);
    const auto& tb = out.rate_limit_strategy().token_bucket();
    CHECK(tb.max_tokens() == 1);
    REQUIRE(tb.has_tokens_per_fill());
    CHECK(tb.tokens_per_fill().value() == 60);
    CHECK(tb.fill_interval().seconds() == 60);
    CHECK(tb.fill_interval().nanos() == 0);
  }
  SUBCASE("tokens_per_fill is set even when it is 0 (Envoy reads unset as 0 too, but says so explicitly)") {
    action out;
    rlqs::to_proto(rlqs::size_assignment(0.5 / 60, per(60, unit::minute), rlqs::strategy::token_bucket), 5,
                   out);
    const auto& tb = out.rate_limit_strategy().token_bucket();
    CHECK(tb.has_tokens_per_fill());
    CHECK(tb.tokens_per_fill().value() == 0);
    // ...and survives the wire.
    action back;
    REQUIRE(back.ParseFromString(out.SerializeAsString()));
    CHECK(back.rate_limit_strategy().token_bucket().has_tokens_per_fill());
  }
  SUBCASE("blanket rules") {
    rlqs::assignment allow;  // allow_all by default
    action out;
    rlqs::to_proto(allow, 7, out);
    CHECK(out.assignment_time_to_live().seconds() == 7);
    REQUIRE(out.rate_limit_strategy().strategy_case() == RateLimitStrategy::kBlanketRule);
    CHECK(out.rate_limit_strategy().blanket_rule() == RateLimitStrategy::ALLOW_ALL);
    action back;  // ALLOW_ALL is 0: the oneof still says which strategy it is after the wire
    REQUIRE(back.ParseFromString(out.SerializeAsString()));
    CHECK(back.rate_limit_strategy().strategy_case() == RateLimitStrategy::kBlanketRule);

    action deny;
    rlqs::to_proto(rlqs::size_assignment(0, per(60, unit::minute), rlqs::strategy::token_bucket), 7, deny);
    REQUIRE(deny.rate_limit_strategy().strategy_case() == RateLimitStrategy::kBlanketRule);
    CHECK(deny.rate_limit_strategy().blanket_rule() == RateLimitStrategy::DENY_ALL);
  }
  SUBCASE("requests per time unit: a weekly rule as DAY") {
    action out;
    rlqs::to_proto(
        rlqs::size_assignment(0.125, per(100000, unit::week), rlqs::strategy::requests_per_time_unit), 15,
        out);
    REQUIRE(out.rate_limit_strategy().strategy_case() == RateLimitStrategy::kRequestsPerTimeUnit);
    const auto& pu = out.rate_limit_strategy().requests_per_time_unit();
    CHECK(pu.requests_per_time_unit() == 10800);
    CHECK(pu.time_unit() == envoy::type::v3::RateLimitUnit::DAY);
  }
}
