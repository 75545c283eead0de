#include "ratelimit/rlqs/quota_stream.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace sluice::ratelimit::rlqs {

namespace rlqs_pb = envoy::service::rate_limit_quota::v3;
using net::grpc::status_code;

quota_stream::quota_stream(std::shared_ptr<worker_state> state, const void* connection,
                           std::optional<tracing::span_context> parent)
    : state_(std::move(state)), connection_(connection), parent_(std::move(parent)) {
  state_->streams.push_back(this);
  ++state_->streams_per_connection[connection_];
}

quota_stream::~quota_stream() {
  for (auto& [group, b] : buckets_) leave(b);
  std::erase(state_->streams, this);
  auto it = state_->streams_per_connection.find(connection_);
  if (it != state_->streams_per_connection.end() && --it->second == 0)
    state_->streams_per_connection.erase(it);
}

void quota_stream::on_message(std::string_view bytes) {
  if (failed_) return;
  tracing::span span;
  if (state_->tracer != nullptr) {
    span =
        state_->tracer->start("envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
                              tracing::span_kind::server, parent_);
    if (span.recording()) {
      span.set_attribute("rpc.system", std::string("grpc"));
      span.set_attribute("rpc.service",
                         std::string("envoy.service.rate_limit_quota.v3.RateLimitQuotaService"));
      span.set_attribute("rpc.method", std::string("StreamRateLimitQuotas"));
    }
  }
  handle(bytes, span);
}

// One usage report; `span` (possibly not recording) hears what it held and how it ended.
void quota_stream::handle(std::string_view bytes, tracing::span& span) {
  rlqs_pb::RateLimitQuotaUsageReports reports;
  if (!reports.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    failed_ = true;
    span.set_error("grpc: error unmarshalling request");
    return end(status_code::internal, "grpc: error unmarshalling request");
  }
  if (state_->stats.reports != nullptr) state_->stats.reports->inc();
  if (!bind_domain(reports.domain())) return span.set_error("bad domain");
  const std::int64_t now = state_->clock.now_micros();
  rlqs_pb::RateLimitQuotaResponse first_answers;
  for (const auto& usage : reports.bucket_quota_usages()) {
    take(usage, now, first_answers);
    if (failed_) return span.set_error("too many buckets");
  }
  if (span.recording()) {
    span.set_attribute("rlqs.domain", domain_);
    span.set_attribute("rlqs.buckets", static_cast<std::int64_t>(reports.bucket_quota_usages_size()));
    span.set_attribute("rlqs.new_buckets", static_cast<std::int64_t>(first_answers.bucket_action_size()));
  }
  if (first_answers.bucket_action_size() > 0) send(first_answers);
}

bool quota_stream::bind_domain(const std::string& domain) {
  if (domain_.empty()) {
    if (domain.empty()) {
      failed_ = true;
      end(status_code::invalid_argument, "the first message of a quota stream must name its domain");
      return false;
    }
    domain_ = domain;
    return true;
  }
  if (domain.empty() || domain == domain_) return true;
  failed_ = true;
  end(status_code::invalid_argument, core::cat("this stream's domain is \"", domain_,
                                               "\"; a report may not name another (\"", domain, "\")"));
  return false;
}

void quota_stream::take(const rlqs_pb::RateLimitQuotaUsageReports::BucketQuotaUsage& usage, std::int64_t now,
                        rlqs_pb::RateLimitQuotaResponse& first_answers) {
  const auto& group = state_->group_for(domain_, usage.bucket_id());
  auto it = buckets_.find(group.get());
  const bool first = it == buckets_.end();
  if (first) {
    if (buckets_.size() >= state_->config.max_buckets_per_stream) {
      failed_ = true;
      return end(status_code::resource_exhausted,
                 core::cat("a quota stream may report at most ", state_->config.max_buckets_per_stream,
                           " buckets (RLQS_MAX_BUCKETS_PER_STREAM)"));
    }
    it = buckets_.try_emplace(group.get()).first;
    it->second.joined_us = now;
    join(*group, it->second);
  }
  auto& b = it->second;
  const auto allowed = usage.num_requests_allowed();
  const auto requests = allowed + std::min(usage.num_requests_denied(), UINT64_MAX - allowed);  // saturating
  b.demand.report(requests, now);
  if (group->stats.allowed != nullptr) {
    group->stats.allowed->add(usage.num_requests_allowed());
    group->stats.denied->add(usage.num_requests_denied());
  }
  if (!first) return;
  std::vector<double> fleet;
  state_->fleet_demands(*group, fleet);  // this client included: it is a member now
  b.sent = state_->assign(b, state_->plan_for(*group, fleet));
  b.sent_at_us = now;
  add_action(first_answers, *group, b.sent,
             static_cast<std::uint32_t>(state_->config.assignment_ttl.count()));
}

void quota_stream::drop(const bucket_group* g) {
  auto it = buckets_.find(g);
  if (it == buckets_.end()) return;
  leave(it->second);
  buckets_.erase(it);
}

void add_action(rlqs_pb::RateLimitQuotaResponse& response, const bucket_group& g, const assignment& a,
                std::uint32_t ttl_seconds) {
  auto& action = *response.add_bucket_action();
  *action.mutable_bucket_id() = g.id;
  to_proto(a, ttl_seconds, *action.mutable_quota_assignment_action());
}

}  // namespace sluice::ratelimit::rlqs
