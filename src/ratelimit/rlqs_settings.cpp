#include "ratelimit/rlqs_settings.hpp"

#include "core/strings.hpp"

namespace sluice::ratelimit {

namespace {

// (A namespace of their own: the library is built as one unit with the other settings files.)
namespace rlqs_env {

constexpr core::setting strategy_setting{"RLQS_STRATEGY", "token_bucket|requests_per_time_unit",
                                         "token_bucket", "what a client's share is sent as"};
constexpr core::setting assignment_ttl{
    "RLQS_ASSIGNMENT_TTL", "duration", "15s",
    "every assignment's time to live: whole seconds, at least 2s; re-sent after "
    "two thirds of it"};
constexpr core::setting bucket_idle_timeout{
    "RLQS_BUCKET_IDLE_TIMEOUT", "duration", "5m",
    "a bucket reported only as 0/0 this long is abandoned: whole seconds, "
    "at least 1s"};
constexpr core::setting max_buckets{
    "RLQS_MAX_BUCKETS_PER_STREAM", "whole number", "10000",
    "buckets one quota stream may report; the next ends it with RESOURCE_EXHAUSTED"};
constexpr core::setting max_streams{"RLQS_MAX_STREAMS_PER_CONNECTION", "whole number", "100",
                                    "quota streams open at once on one connection"};
constexpr core::setting all[]{strategy_setting, assignment_ttl, bucket_idle_timeout, max_buckets,
                              max_streams};

}  // namespace rlqs_env

// Clients read only whole seconds of a duration (Envoy: `.seconds()`); anything else would be cut silently.
std::chrono::seconds whole_seconds(const core::env_reader& env, const core::setting& s,
                                   std::chrono::seconds min) {
  const auto d = env.get_duration(s);
  if (d % std::chrono::seconds(1) != std::chrono::nanoseconds(0) || d < min) {
    throw core::settings_error(core::cat("invalid value '", env.get_string(s), "' for ", s.name,
                                         ": must be whole seconds, at least ", min.count(), "s"));
  }
  return std::chrono::duration_cast<std::chrono::seconds>(d);
}

}  // namespace

std::span<const core::setting> rlqs_settings() {
  using namespace rlqs_env;
  return all;
}

rlqs::settings read_rlqs_settings(const core::env_reader& env) {
  using namespace rlqs_env;
  rlqs::settings s;
  const auto strategy = env.get_choice(strategy_setting, true);
  s.strategy =
      strategy == "token_bucket" ? rlqs::strategy::token_bucket : rlqs::strategy::requests_per_time_unit;
  s.assignment_ttl = whole_seconds(env, assignment_ttl, std::chrono::seconds(2));
  s.bucket_idle_timeout = whole_seconds(env, bucket_idle_timeout, std::chrono::seconds(1));
  s.max_buckets_per_stream = env.get_uint(max_buckets, 1, 10'000'000);
  s.max_streams_per_connection = env.get_uint(max_streams, 1, 1'000'000);
  return s;
}

}  // namespace sluice::ratelimit
