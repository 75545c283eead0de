#pragma once
// The quota service on one worker, served in-process: a quota_service in a method table behind a gRPC server
// connection with no socket (tests/support/h2_loopback), an nghttp2 client for its streams, a fake clock for
// the demand meters and idle timeouts. Planning runs on the service's real steady_timer: plan() starts it
// (settings.plan_period, short here) and runs the io_context for a few periods with the fake clock standing
// still, so what a plan decides depends only on the reports and the fake time.

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../../support/h2_loopback.hpp"
#include "../rules_fixture.hpp"
#include "core/clock.hpp"
#include "net/grpc/method_table.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/rlqs/quota_service.hpp"
#include "rlqs.pb.h"
#include "stats/store.hpp"

namespace sluice::test::rlqs_support {

namespace rlqs = ratelimit::rlqs;
namespace pb = envoy::service::rate_limit_quota::v3;
using action = pb::RateLimitQuotaResponse_BucketAction;
using bucket = std::map<std::string, std::string>;

constexpr const char* quota_path =
    "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas";

// Domain `quota`: tenant 60 per minute (the budget 1/s); free unlimited; blocked 0; shadow in shadow mode;
// fast 100 per second; big 6000 per minute (100/s).
constexpr const char* quota_rules = R"(---
domain: quota
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 60}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: fast
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 6000}
)";

inline rlqs::settings test_settings() {
  rlqs::settings s;
  s.assignment_ttl = std::chrono::seconds(6);
  s.bucket_idle_timeout = std::chrono::seconds(10);
  s.plan_period = std::chrono::milliseconds(2);
  return s;
}

struct usage {
  bucket id;
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
};

// One framed RateLimitQuotaUsageReports.
inline std::string reports(const std::string& domain, const std::vector<usage>& usages) {
  pb::RateLimitQuotaUsageReports r;
  r.set_domain(domain);
  for (const auto& u : usages) {
    auto* q = r.add_bucket_quota_usages();
    for (const auto& [k, v] : u.id) (*q->mutable_bucket_id()->mutable_bucket())[k] = v;
    q->set_num_requests_allowed(u.allowed);
    q->set_num_requests_denied(u.denied);
  }
  return h2_client::frame(r.SerializeAsString());
}

// The responses a client received on a stream, in order.
inline std::vector<pb::RateLimitQuotaResponse> responses(const std::string& body) {
  std::vector<pb::RateLimitQuotaResponse> out;
  std::size_t at = 0;
  for (; at + 5 <= body.size();) {
    REQUIRE(body[at] == 0);  // not compressed
    const std::size_t n = static_cast<std::size_t>(static_cast<unsigned char>(body[at + 1])) << 24 |
                          static_cast<std::size_t>(static_cast<unsigned char>(body[at + 2])) << 16 |
                          static_cast<std::size_t>(static_cast<unsigned char>(body[at + 3])) << 8 |
                          static_cast<std::size_t>(static_cast<unsigned char>(body[at + 4]));
    REQUIRE(at + 5 + n <= body.size());
    pb::RateLimitQuotaResponse m;
    REQUIRE(m.ParseFromString(body.substr(at + 5, n)));
    out.push_back(std::move(m));
    at += 5 + n;
  }
  CHECK(at == body.size());
  return out;
}

inline bucket bucket_of(const action& a) {
  return {a.bucket_id().bucket().begin(), a.bucket_id().bucket().end()};
}

// Every action a client received for one bucket, in order.
inline std::vector<action> actions_for(const std::string& body, const bucket& b) {
  std::vector<action> out;
  for (const auto& r : responses(body)) {
    for (const auto& a : r.bucket_action()) {
      if (bucket_of(a) == b) out.push_back(a);
    }
  }
  return out;
}

// grpc-status: in the trailers, or in the only HEADERS block (Trailers-Only) when nothing was sent before.
inline std::string grpc_status(const response& r) {
  if (auto it = r.trailers.find("grpc-status"); it != r.trailers.end()) return it->second;
  if (auto it = r.headers.find("grpc-status"); it != r.headers.end()) return it->second;
  return "";
}
inline std::string grpc_message(const response& r) {
  if (auto it = r.trailers.find("grpc-message"); it != r.trailers.end()) return it->second;
  if (auto it = r.headers.find("grpc-message"); it != r.headers.end()) return it->second;
  return "";
}

// A token bucket's numbers, to compare in one CHECK.
struct bucket_numbers {
  std::uint32_t max_tokens = 0;
  std::uint32_t tokens_per_fill = 0;
  std::int64_t fill_seconds = 0;
  bool operator==(const bucket_numbers&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const bucket_numbers& b) {
  return os << "{max_tokens " << b.max_tokens << ", tokens_per_fill " << b.tokens_per_fill << ", fill "
            << b.fill_seconds << " s}";
}
inline std::optional<bucket_numbers> token_bucket_of(const action& a) {
  if (!a.has_quota_assignment_action()) return std::nullopt;
  const auto& s = a.quota_assignment_action().rate_limit_strategy();
  if (!s.has_token_bucket()) return std::nullopt;
  return bucket_numbers{s.token_bucket().max_tokens(), s.token_bucket().tokens_per_fill().value(),
                        s.token_bucket().fill_interval().seconds()};
}
// The blanket rule of an assignment; nullopt for anything else.
inline std::optional<envoy::type::v3::RateLimitStrategy::BlanketRule> blanket_of(const action& a) {
  if (!a.has_quota_assignment_action()) return std::nullopt;
  const auto& s = a.quota_assignment_action().rate_limit_strategy();
  if (s.strategy_case() != envoy::type::v3::RateLimitStrategy::kBlanketRule) return std::nullopt;
  return s.blanket_rule();
}

struct quota_fixture {
  explicit quota_fixture(rlqs::settings s = test_settings(), bool with_rules = true,
                         rlqs::demand_exchange* shared = nullptr, std::size_t worker = 0)
      : config(s), exchange(shared != nullptr ? *shared : own_exchange) {
    service =
        std::make_unique<rlqs::quota_service>(config, worker, exchange, clock, stats, io.get_executor());
    service->add_to(methods);
    if (with_rules) service->set_rules(compile_rules(quota_rules, stats));
    server = std::make_unique<grpc_server_side>(io, methods);
  }
  ~quota_fixture() { service->stop(); }

  std::int32_t open() { return client.open({{":path", quota_path}, {"content-type", "application/grpc"}}); }
  void send(std::int32_t id, const std::string& framed, bool end = false) {
    client.send(id, framed, end);
    pump();
  }
  void pump() { client.pump(server->session(), io); }
  // Plans for a few periods (the fake clock standing still) and delivers what the plans sent.
  void plan() {
    if (!started) service->start();
    started = true;
    io.restart();
    io.run_for(config.plan_period * 10);
    pump();
  }
  const std::string& body(std::int32_t id) { return client.at(id).body; }
  std::int64_t gauge(const std::string& name) { return stats.get_gauge(name).value(); }
  std::uint64_t counter(const std::string& name) { return stats.get_counter(name).value(); }

  boost::asio::io_context io;
  core::fake_clock clock{1'700'000'000};
  stats::store stats;
  rlqs::settings config;
  rlqs::in_process_exchange own_exchange{1};
  rlqs::demand_exchange& exchange;
  net::grpc::method_table methods;
  std::unique_ptr<rlqs::quota_service> service;
  std::unique_ptr<grpc_server_side> server;
  h2_client client;
  bool started = false;
};

}  // namespace sluice::test::rlqs_support
