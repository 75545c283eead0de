#pragma once
// The rlqs leg's reference model (rlqs_leg.cpp): max-min fair shares computed plainly from the clients' true
// demands, and what an assignment lets a client admit in a rule window, read from the proto as Envoy reads
// it.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "ratelimit/rlqs/assignment.hpp"
#include "rlqs.pb.h"

namespace sluice::sim::rlqs_sim {

// A bucket's rule: `requests` per window of unit × multiplier.
struct budget_shape {
  std::uint32_t requests;
  const char* unit;
  std::int64_t unit_s;
  std::uint32_t multiplier;
  std::int64_t window_s() const { return unit_s * multiplier; }
  double rate() const { return static_cast<double>(requests) / static_cast<double>(window_s()); }
};

// Fair shares (requests per second) of `budget` for clients of these true demands ("Shares are max-min fair"
// in docs/guides/rlqs.md#the-protocol): a client's need is its demand × 1.1, at least 5% of the budget split
// over the clients; it gets min(need, L), L being the level at which the shares add up to the budget (found
// by bisection), or, when all needs fit, its need plus an equal part of what is left.
inline std::vector<double> fair_shares(const std::vector<double>& demands, double budget) {
  std::vector<double> shares;
  const double floor = budget * 0.05 / static_cast<double>(demands.size());
  double total = 0;
  for (double d : demands) total += shares.emplace_back(std::max(d * 1.1, floor));
  if (total <= budget) {
    for (double& s : shares) s += (budget - total) / static_cast<double>(shares.size());
    return shares;
  }
  double low = 0, high = budget;
  for (int i = 0; i < 100; ++i) {
    const double level = (low + high) / 2;
    double given = 0;
    for (double s : shares) given += std::min(s, level);
    (given < budget ? low : high) = level;
  }
  for (double& s : shares) s = std::min(s, low);
  return shares;
}

// What a client holds for a bucket.
struct holding {
  double per_window = 0;  // the most it admits in a rule window: max_tokens + the window's refill
  bool small = false;     // a share under 100 a window: a burst of 1 on top of its whole refill
  std::int64_t ttl_s = 0;
};

// An assignment as Envoy (or an A77 client) reads it; nothing for a blanket rule.
inline std::optional<holding> as_received(const ratelimit::rlqs::assignment& a, std::uint32_t ttl_s,
                                          const budget_shape& shape) {
  envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction action;
  ratelimit::rlqs::to_proto(a, ttl_s, action);
  const auto& strategy = action.rate_limit_strategy();
  const auto window = static_cast<double>(shape.window_s());
  holding h;
  h.ttl_s = action.assignment_time_to_live().seconds();
  if (strategy.has_token_bucket()) {
    const auto& tb = strategy.token_bucket();
    h.per_window = tb.max_tokens() + static_cast<double>(tb.tokens_per_fill().value()) * window /
                                         static_cast<double>(tb.fill_interval().seconds());
    h.small = tb.max_tokens() == 1 && h.per_window < 101;
    return h;
  }
  if (!strategy.has_requests_per_time_unit()) return std::nullopt;
  const auto& u = strategy.requests_per_time_unit();
  const std::int64_t unit_s[] = {0, 1, 60, 3600, 86400};  // envoy.type.v3.RateLimitUnit, SECOND to DAY
  h.per_window = static_cast<double>(u.requests_per_time_unit()) * window /
                 static_cast<double>(unit_s[std::clamp<int>(u.time_unit(), 1, 4)]);
  return h;
}

}  // namespace sluice::sim::rlqs_sim
