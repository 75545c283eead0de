#pragma once
// What a client is told for one bucket: a blanket rule, or its share of the bucket's budget as a token bucket
// (or, for clients that apply it, requests per time unit), sized so that within any window of the rule the
// client admits at most its share: max_tokens (the burst a new bucket starts with) plus what the refill adds
// over the window never exceeds it — except for shares under 100 per window, which keep their whole refill
// with a burst of one token (one request over the share at most). Fill intervals are whole seconds ≥ 1 s and
// fixed per rule (Envoy keeps a token bucket across assignments only when max_tokens, tokens_per_fill and the
// interval's nanos are equal, and compares no seconds: a changed interval alone would keep the old rate).

#include <cstdint>

#include "ratelimit/config/unit.hpp"

namespace envoy::service::rate_limit_quota::v3 {
class RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction;
}

namespace sluice::ratelimit::rlqs {

enum class strategy : std::uint8_t { token_bucket, requests_per_time_unit };

// The share of the burst in a client's share (at least one token).
constexpr double burst_fraction = 0.01;

struct assignment {
  enum class kind : std::uint8_t {
    allow_all,
    deny_all,
    token_bucket,
    requests_per_time_unit
  } what = kind::allow_all;
  std::uint32_t max_tokens = 0;
  std::uint32_t tokens_per_fill = 0;
  std::uint32_t fill_seconds = 0;
  std::uint64_t requests_per_time_unit = 0;
  config::unit time_unit = config::unit::unknown;
  double rate = 0;  // the requests per second it allows, to compare assignments

  bool same_action(const assignment& o) const {
    return what == o.what && max_tokens == o.max_tokens && tokens_per_fill == o.tokens_per_fill &&
           fill_seconds == o.fill_seconds && requests_per_time_unit == o.requests_per_time_unit &&
           time_unit == o.time_unit;
  }
};

// A rule's budget: `requests` per window of `window_seconds` (unit × unit_multiplier).
struct budget {
  std::uint64_t requests = 0;
  std::int64_t window_seconds = 1;
  config::unit unit = config::unit::second;
  std::uint32_t unit_multiplier = 1;

  double rate() const { return static_cast<double>(requests) / static_cast<double>(window_seconds); }
};

// A client's assignment for a share of `share_rate` requests per second of `b`.
assignment size_assignment(double share_rate, const budget& b, strategy s);

// The proto action for an assignment, with the time to live.
void to_proto(
    const assignment& a, std::uint32_t ttl_seconds,
    envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction& out);

}  // namespace sluice::ratelimit::rlqs
