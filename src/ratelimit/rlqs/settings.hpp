#pragma once
// The quota service's settings (docs/guides/rlqs.md#settings-rlqs_), read once by ratelimit/settings.cpp.

#include <chrono>
#include <cstddef>

#include "ratelimit/rlqs/assignment.hpp"

namespace sluice::ratelimit::rlqs {

struct settings {
  rlqs::strategy strategy = strategy::token_bucket;  // RLQS_STRATEGY
  std::chrono::seconds assignment_ttl{15};           // RLQS_ASSIGNMENT_TTL: three of Envoy's 5 s reports
  std::chrono::seconds bucket_idle_timeout{300};     // RLQS_BUCKET_IDLE_TIMEOUT
  std::size_t max_buckets_per_stream = 10'000;       // RLQS_MAX_BUCKETS_PER_STREAM
  std::size_t max_streams_per_connection = 100;      // RLQS_MAX_STREAMS_PER_CONNECTION
  std::chrono::milliseconds plan_period{500};        // how often shares are re-planned (not a setting)
};

// An assignment is pushed unasked when the client's share moved by more than this fraction of it.
constexpr double push_threshold = 0.10;
// An unchanged assignment is re-sent when this fraction of its time to live has passed.
constexpr double resend_after_ttl_fraction = 2.0 / 3.0;

}  // namespace sluice::ratelimit::rlqs
