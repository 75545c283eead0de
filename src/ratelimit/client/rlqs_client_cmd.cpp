#include "ratelimit/client/rlqs_client_cmd.hpp"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "core/strings.hpp"
#include "net/grpc/status.hpp"
#include "ratelimit/client/channel.hpp"
#include "ratelimit/client/rlqs_client_flags.hpp"
#include "rlqs.grpc.pb.h"

namespace sluice::ratelimit::client {

namespace {

namespace pb = envoy::service::rate_limit_quota::v3;
using clock_type = std::chrono::steady_clock;

constexpr int exit_ok = 0;
constexpr int exit_error = 2;

// What one bucket's requests are decided by: the last assignment, applied as Envoy applies it.
struct local_bucket {
  pb::BucketId id;
  std::uint64_t allowed = 0;  // since the last report
  std::uint64_t denied = 0;
  bool reported = false;
  envoy::type::v3::RateLimitStrategy strategy;
  bool assigned = false;
  clock_type::time_point expires;
  double tokens = 0;  // token bucket
  double max_tokens = 0;
  double fill_rate = 0;
  clock_type::time_point last_fill;
  std::int64_t window = -1;  // requests_per_time_unit: the window counted in, and its count
  std::uint64_t window_count = 0;

  bool decide(clock_type::time_point now) {
    if (assigned && now >= expires) assigned = false;  // expired: back to no assignment (allow)
    if (!assigned) return true;
    switch (strategy.strategy_case()) {
      case envoy::type::v3::RateLimitStrategy::kBlanketRule:
        return strategy.blanket_rule() == envoy::type::v3::RateLimitStrategy::ALLOW_ALL;
      case envoy::type::v3::RateLimitStrategy::kTokenBucket: {
        tokens =
            std::min(max_tokens, tokens + std::chrono::duration<double>(now - last_fill).count() * fill_rate);
        last_fill = now;
        if (tokens < 1) return false;
        tokens -= 1;
        return true;
      }
      case envoy::type::v3::RateLimitStrategy::kRequestsPerTimeUnit: {
        static constexpr std::int64_t unit_seconds[] = {1, 1, 60, 3600, 86400, 2592000, 31536000};
        const auto unit = std::clamp<int>(strategy.requests_per_time_unit().time_unit(), 0, 6);
        const auto w = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count() /
                       unit_seconds[unit];
        if (w != window) window = w, window_count = 0;
        if (window_count >= strategy.requests_per_time_unit().requests_per_time_unit()) return false;
        ++window_count;
        return true;
      }
      default:
        return true;
    }
  }

  void assign(const pb::RateLimitQuotaResponse::BucketAction::QuotaAssignmentAction& a,
              clock_type::time_point now) {
    const auto& s = a.rate_limit_strategy();
    if (s.has_token_bucket()) {
      const auto& tb = s.token_bucket();
      const bool same = assigned && strategy.has_token_bucket() &&
                        strategy.token_bucket().max_tokens() == tb.max_tokens() &&
                        strategy.token_bucket().tokens_per_fill().value() == tb.tokens_per_fill().value() &&
                        strategy.token_bucket().fill_interval().seconds() == tb.fill_interval().seconds();
      if (!same) {
        max_tokens = tb.max_tokens();
        tokens = max_tokens;  // a new bucket starts full
        const auto seconds = tb.fill_interval().seconds();
        fill_rate = seconds > 0
                        ? static_cast<double>(tb.tokens_per_fill().value()) / static_cast<double>(seconds)
                        : 0;
        last_fill = now;
      }
    }
    strategy = s;
    assigned = true;
    expires = now + std::chrono::seconds(a.assignment_time_to_live().seconds());
  }
};

std::string bucket_text(const pb::BucketId& id) {
  std::map<std::string, std::string> sorted(id.bucket().begin(), id.bucket().end());
  std::string out;
  for (const auto& [k, v] : sorted) out += core::cat(out.empty() ? "" : ",", k, "=", v);
  return out;
}

std::string single_line(const google::protobuf::Message& m, bool json) {
  std::string text;
  if (json) {
    (void)google::protobuf::util::MessageToJsonString(m, &text);
    return text;
  }
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(m, &text);
  return text;
}

class data_plane {
 public:
  explicit data_plane(const rlqs_client_options& o) : o_(o), start_(clock_type::now()) {
    for (const auto& pairs : o.descriptors) {
      auto& b = buckets_.emplace_back();
      for (const auto& [k, v] : pairs) (*b.id.mutable_bucket())[k] = v;
    }
  }

  int run() {
    const auto channel = open_channel(o_);
    auto stub = pb::RateLimitQuotaService::NewStub(channel);
    grpc::ClientContext context;
    auto stream = stub->StreamRateLimitQuotas(&context);
    std::thread reader([&] { read_actions(*stream); });
    simulate(*stream);
    stream->WritesDone();
    context.TryCancel();
    reader.join();
    const auto status = stream->Finish();
    if (ended_by_server_ && !status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      if (auto failure = connect_failure(status, *channel, o_)) {
        std::cerr << "sluice rlqs-client: " << *failure << "\n";
        return exit_error;
      }
      std::cerr << "stream ended: " << net::grpc::status_name(status.error_code()) << ": "
                << status.error_message() << "\n";
      return exit_error;
    }
    return exit_ok;
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(clock_type::now() - start_).count(); }

  void read_actions(
      grpc::ClientReaderWriter<pb::RateLimitQuotaUsageReports, pb::RateLimitQuotaResponse>& stream) {
    pb::RateLimitQuotaResponse response;
    while (stream.Read(&response)) {
      const auto now = clock_type::now();
      std::lock_guard lock(mutex_);
      for (const auto& action : response.bucket_action()) {
        print("action", action);
        for (auto& b : buckets_) {
          if (bucket_text(b.id) != bucket_text(action.bucket_id())) continue;
          if (action.has_abandon_action()) {
            b.assigned = false;
            b.reported = false;  // Envoy erases it: its next request is a first report again
          } else if (action.has_quota_assignment_action()) {
            b.assign(action.quota_assignment_action(), now);
          }
        }
      }
    }
    std::lock_guard lock(mutex_);
    if (!stopping_) ended_by_server_ = true;
  }

  void simulate(
      grpc::ClientReaderWriter<pb::RateLimitQuotaUsageReports, pb::RateLimitQuotaResponse>& stream) {
    const auto end = start_ + o_.duration;
    auto next_report = start_ + o_.interval;
    std::uint64_t sent = 0;
    while (clock_type::now() < end) {
      {
        std::lock_guard lock(mutex_);
        if (ended_by_server_) break;
        const auto now = clock_type::now();
        const auto due =
            static_cast<std::uint64_t>(std::chrono::duration<double>(now - start_).count() * o_.rate);
        for (; sent < due; ++sent) {
          for (auto& b : buckets_) request(b, now, stream);
        }
        if (now >= next_report) {
          report(stream, now);
          next_report += o_.interval;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }

  void request(local_bucket& b, clock_type::time_point now,
               grpc::ClientReaderWriter<pb::RateLimitQuotaUsageReports, pb::RateLimitQuotaResponse>& stream) {
    const bool admitted = b.decide(now);
    ++(admitted ? b.allowed : b.denied);
    if (b.reported) return;
    b.reported = true;
    pb::RateLimitQuotaUsageReports first;  // a new bucket: reported at once, alone, time_elapsed 0
    first.set_domain(o_.domain);
    add_usage(first, b, 0);
    send(stream, first);
  }

  void report(grpc::ClientReaderWriter<pb::RateLimitQuotaUsageReports, pb::RateLimitQuotaResponse>& stream,
              clock_type::time_point) {
    pb::RateLimitQuotaUsageReports reports;
    reports.set_domain(o_.domain);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(o_.interval).count();
    for (auto& b : buckets_) {
      if (b.reported) add_usage(reports, b, seconds);
    }
    if (reports.bucket_quota_usages_size() > 0) send(stream, reports);
  }

  static void add_usage(pb::RateLimitQuotaUsageReports& reports, local_bucket& b, std::int64_t seconds) {
    auto& u = *reports.add_bucket_quota_usages();
    *u.mutable_bucket_id() = b.id;
    u.mutable_time_elapsed()->set_seconds(seconds);
    u.set_num_requests_allowed(b.allowed);
    u.set_num_requests_denied(b.denied);
    b.allowed = b.denied = 0;
  }

  void send(grpc::ClientReaderWriter<pb::RateLimitQuotaUsageReports, pb::RateLimitQuotaResponse>& stream,
            const pb::RateLimitQuotaUsageReports& reports) {
    for (const auto& u : reports.bucket_quota_usages()) print("report", u);
    stream.Write(reports);
  }

  void print(std::string_view what, const google::protobuf::Message& m) const {
    std::cout << core::cat(elapsed()).substr(0, 6) << "s " << what << " " << single_line(m, o_.json)
              << std::endl;
  }

  const rlqs_client_options& o_;
  const clock_type::time_point start_;
  std::mutex mutex_;
  std::vector<local_bucket> buckets_;
  bool stopping_ = false;
  bool ended_by_server_ = false;
};

}  // namespace

int run_rlqs_client(std::span<const std::string_view> args) {
  auto parsed = parse_rlqs_client_flags(args);
  if (std::holds_alternative<help_requested>(parsed)) {
    std::cout << rlqs_client_usage;
    return exit_ok;
  }
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    std::cerr << "sluice rlqs-client: " << *error << "\n\n" << rlqs_client_usage;
    return exit_error;
  }
  try {
    return data_plane(std::get<rlqs_client_options>(parsed)).run();
  } catch (const std::exception& e) {
    std::cerr << "sluice rlqs-client: " << e.what() << "\n";
    return exit_error;
  }
}

}  // namespace sluice::ratelimit::client
