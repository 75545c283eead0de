#include "ratelimit/rlqs_settings.hpp"

#include "core/strings.hpp"

namespace sluice::ratelimit {

namespace {

// Clients read only whole seconds of a duration (Envoy: `.seconds()`); anything else would be cut silently.
std::chrono::seconds whole_seconds(const core::env_reader& env, const std::string& name,
                                   std::chrono::seconds def, std::chrono::seconds min) {
  const auto d = env.get_duration(name, def);
  if (d % std::chrono::seconds(1) != std::chrono::nanoseconds(0) || d < min) {
    throw core::settings_error(core::cat("invalid value '", env.get_string(name, ""), "' for ", name,
                                         ": must be whole seconds, at least ", min.count(), "s"));
  }
  return std::chrono::duration_cast<std::chrono::seconds>(d);
}

}  // namespace

rlqs::settings read_rlqs_settings(const core::env_reader& env) {
  rlqs::settings s;
  const auto strategy =
      env.get_choice("RLQS_STRATEGY", "token_bucket", {"token_bucket", "requests_per_time_unit"}, true);
  s.strategy =
      strategy == "token_bucket" ? rlqs::strategy::token_bucket : rlqs::strategy::requests_per_time_unit;
  s.assignment_ttl = whole_seconds(env, "RLQS_ASSIGNMENT_TTL", s.assignment_ttl, std::chrono::seconds(2));
  s.bucket_idle_timeout =
      whole_seconds(env, "RLQS_BUCKET_IDLE_TIMEOUT", s.bucket_idle_timeout, std::chrono::seconds(1));
  s.max_buckets_per_stream =
      env.get_uint("RLQS_MAX_BUCKETS_PER_STREAM", s.max_buckets_per_stream, 1, 10'000'000);
  s.max_streams_per_connection =
      env.get_uint("RLQS_MAX_STREAMS_PER_CONNECTION", s.max_streams_per_connection, 1, 1'000'000);
  return s;
}

}  // namespace sluice::ratelimit
