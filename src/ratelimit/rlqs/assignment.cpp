#include "ratelimit/rlqs/assignment.hpp"

#include <algorithm>
#include <cmath>

#include "rlqs.pb.h"

namespace sluice::ratelimit::rlqs {

namespace {

// The refill is given per fill interval in whole tokens: an interval of at least a minute keeps the rounding
// under one token per minute (Envoy refills continuously, at tokens_per_fill ÷ interval per second).
constexpr std::int64_t min_fill_seconds = 60;

std::uint32_t clamp_u32(double v) {
  if (!(v > 0)) return 0;
  return static_cast<std::uint32_t>(std::min<double>(std::floor(v), 4294967295.0));
}

assignment token_bucket_for(double share_rate, const budget& b) {
  assignment a;
  a.what = assignment::kind::token_bucket;
  const double window = static_cast<double>(b.window_seconds);
  const double share = share_rate * window;  // requests per window
  a.max_tokens = clamp_u32(share * burst_fraction);
  // The burst comes out of the share, so a window never admits more than the share; a share too small for a
  // burst of one whole token (under 100 a window) keeps its whole refill and a burst of one, or it would
  // never refill at all: such a client may admit one request more than its share in a window.
  const double refill = a.max_tokens >= 1 ? share - a.max_tokens : share;
  a.max_tokens = std::max<std::uint32_t>(1, a.max_tokens);
  a.fill_seconds =
      static_cast<std::uint32_t>(std::clamp<std::int64_t>(b.window_seconds, min_fill_seconds, 0xffffffff));
  const double refill_rate = std::max(0.0, refill) / window;
  a.tokens_per_fill = clamp_u32(refill_rate * a.fill_seconds);
  a.rate = static_cast<double>(a.tokens_per_fill) / a.fill_seconds;
  return a;
}

assignment per_unit_for(double share_rate, const budget& b) {
  assignment a;
  a.what = assignment::kind::requests_per_time_unit;
  // envoy.type.v3.RateLimitUnit has no WEEK: a weekly rule is given per day.
  a.time_unit = b.unit == config::unit::week ? config::unit::day : b.unit;
  const auto unit_seconds = static_cast<double>(config::unit_seconds(a.time_unit));
  a.requests_per_time_unit = clamp_u32(share_rate * unit_seconds);
  a.rate = static_cast<double>(a.requests_per_time_unit) / unit_seconds;
  return a;
}

}  // namespace

assignment size_assignment(double share_rate, const budget& b, strategy s) {
  if (!(share_rate > 0)) {
    assignment deny;
    deny.what = assignment::kind::deny_all;
    return deny;
  }
  return s == strategy::token_bucket ? token_bucket_for(share_rate, b) : per_unit_for(share_rate, b);
}

void to_proto(
    const assignment& a, std::uint32_t ttl_seconds,
    envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction& out) {
  out.mutable_assignment_time_to_live()->set_seconds(ttl_seconds);
  auto& strategy = *out.mutable_rate_limit_strategy();
  switch (a.what) {
    case assignment::kind::allow_all:
      strategy.set_blanket_rule(envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
      break;
    case assignment::kind::deny_all:
      strategy.set_blanket_rule(envoy::type::v3::RateLimitStrategy::DENY_ALL);
      break;
    case assignment::kind::token_bucket: {
      auto& tb = *strategy.mutable_token_bucket();
      tb.set_max_tokens(a.max_tokens);
      tb.mutable_tokens_per_fill()->set_value(a.tokens_per_fill);  // always set: Envoy reads unset as 0
      tb.mutable_fill_interval()->set_seconds(a.fill_seconds);
      break;
    }
    case assignment::kind::requests_per_time_unit: {
      auto& per_unit = *strategy.mutable_requests_per_time_unit();
      per_unit.set_requests_per_time_unit(a.requests_per_time_unit);
      per_unit.set_time_unit(static_cast<envoy::type::v3::RateLimitUnit>(a.time_unit));
      break;
    }
  }
}

}  // namespace sluice::ratelimit::rlqs
