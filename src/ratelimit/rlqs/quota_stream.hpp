#pragma once
// One StreamRateLimitQuotas call: one client. Binds the domain at the first message (A77 clients send it
// only there, Envoy in every message; a different one later ends the stream with INVALID_ARGUMENT), keeps a
// demand meter per bucket reported, answers a bucket's first report at once, and takes the actions the
// worker's plan pushes. The proto's validation rules are not applied to reports: real clients break them
// (Envoy's first report has time_elapsed 0).

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "net/grpc/call.hpp"
#include "ratelimit/rlqs/worker_state.hpp"
#include "rlqs.pb.h"
#include "tracing/tracer.hpp"

namespace sluice::ratelimit::rlqs {

class quota_stream final : public net::grpc::stream_listener {
 public:
  // `parent`: the trace context the stream's headers carried (each report's span is its child).
  quota_stream(std::shared_ptr<worker_state> state, const void* connection,
               std::optional<tracing::span_context> parent = std::nullopt);
  ~quota_stream() override;
  quota_stream(const quota_stream&) = delete;
  quota_stream& operator=(const quota_stream&) = delete;

  void on_message(std::string_view bytes) override;

  // For the plan: the stream's buckets, and a way to send it actions.
  std::unordered_map<const bucket_group*, stream_bucket>& buckets() { return buckets_; }
  bool open() const { return call_ != nullptr && !call_->done(); }
  void send(const envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse& response) {
    call_->write(response);
  }
  // Ends the call with this status (the stream is then dropped when it closes).
  void end(net::grpc::status_code code, std::string_view message) { call_->finish(code, message); }
  // Forgets a bucket (abandoned).
  void drop(const bucket_group* g);

 private:
  bool bind_domain(const std::string& domain);
  void handle(std::string_view bytes, tracing::span& span);
  void take(const envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports::BucketQuotaUsage& usage,
            std::int64_t now, envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse& first_answers);

  std::shared_ptr<worker_state> state_;
  const void* connection_;
  std::optional<tracing::span_context> parent_;
  std::string domain_;
  std::unordered_map<const bucket_group*, stream_bucket> buckets_;
  bool failed_ = false;
};

// Appends an assignment action for a bucket to a response.
void add_action(envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse& response, const bucket_group& g,
                const assignment& a, std::uint32_t ttl_seconds);

}  // namespace sluice::ratelimit::rlqs
