#pragma once
// `sluice rlqs-client`: a small data plane for debugging a Rate Limit Quota Service deployment. It opens
// StreamRateLimitQuotas as Envoy's rate_limit_quota filter does (domain in every message, a bucket's first
// request reported at once with time_elapsed 0, then every bucket every -interval, 0/0 included), sends each
// bucket simulated requests at -rate and decides them locally as Envoy would (blanket rules, token buckets,
// requests_per_time_unit too), and prints every action received and every report sent. A gRPC C++ client.

#include <span>
#include <string_view>

namespace sluice::ratelimit::client {

// args: the flags after "rlqs-client".
int run_rlqs_client(std::span<const std::string_view> args);

}  // namespace sluice::ratelimit::client
