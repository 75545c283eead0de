#pragma once
// The flags of `sluice rlqs-client`: the connection flags of `sluice client` (-dial_string, -unix, -domain,
// -json, -grpc-*) and what the simulated data plane does: -bucket k=v[,k=v] (repeatable), -rate, -duration,
// -interval.

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "ratelimit/client/client_flags.hpp"

namespace sluice::ratelimit::client {

struct rlqs_client_options : client_options {
  // `descriptors` (one per -bucket) are the buckets' key=value pairs.
  double rate = 10;                                              // -rate: requests per second per bucket
  std::chrono::nanoseconds duration = std::chrono::seconds(30);  // -duration
  std::chrono::nanoseconds interval = std::chrono::seconds(5);   // -interval: usage reports (Envoy's: 5s)
};

std::variant<rlqs_client_options, help_requested, std::string> parse_rlqs_client_flags(
    std::span<const std::string_view> args);

extern const std::string_view rlqs_client_usage;

}  // namespace sluice::ratelimit::client
