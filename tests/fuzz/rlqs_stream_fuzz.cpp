// libFuzzer: quota streams driven by arbitrary input. The input is a list of operations on one HTTP/2
// connection to the quota service (in-process, no socket): open a stream, send a usage report built from the
// input (domains, buckets from a small alphabet so they repeat, counts), send raw bytes as a message or as
// part of one (frames split anywhere, malformed messages), half-close, reset, let time pass and plan, reload
// the rules. Every token bucket the service sends must stay within its rule's budget per window, with
// whole-second intervals and a burst of at least one token.
//
// Build and run: scripts/fuzz rlqs_stream [seconds]

#include <google/protobuf/stubs/logging.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../support/h2_loopback.hpp"
#include "core/clock.hpp"
#include "net/grpc/method_table.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/rlqs/quota_service.hpp"
#include "rlqs.pb.h"
#include "stats/store.hpp"

namespace {

using namespace sluice;
namespace pb = envoy::service::rate_limit_quota::v3;

constexpr const char* path = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas";

// Budgets per window, by rule key: checked against every token bucket sent.
constexpr const char* rules_a = R"(
domain: quota
descriptors:
  - {key: k0, rate_limit: {unit: second, requests_per_unit: 10}}
  - {key: k1, rate_limit: {unit: minute, requests_per_unit: 600}}
  - {key: k2, rate_limit: {unit: second, requests_per_unit: 0}}
  - {key: k3, rate_limit: {unlimited: true}}
  - key: k4
    descriptors:
      - {key: k0, rate_limit: {unit: hour, requests_per_unit: 5, unit_multiplier: 2}}
)";
constexpr const char* rules_b = R"(
domain: quota
descriptors:
  - {key: k0, rate_limit: {unit: second, requests_per_unit: 3}}
  - {key: k1, shadow_mode: true, rate_limit: {unit: minute, requests_per_unit: 1}}
)";
constexpr std::int64_t largest_budget_window = 7200;

struct world {
  boost::asio::io_context io;
  core::fake_clock clock{1'800'000'000};
  stats::store stats;
  ratelimit::rlqs::settings settings;
  ratelimit::rlqs::in_process_exchange exchange{1};
  std::unique_ptr<ratelimit::rlqs::quota_service> service;
  net::grpc::method_table methods;
  std::shared_ptr<const ratelimit::config::rule_set> rules[2];

  world() {
    settings.max_buckets_per_stream = 8;
    settings.max_streams_per_connection = 4;
    settings.bucket_idle_timeout = std::chrono::seconds(3);
    service = std::make_unique<ratelimit::rlqs::quota_service>(settings, 0, exchange, clock, stats,
                                                               io.get_executor());
    service->add_to(methods);
    for (int i = 0; i < 2; ++i) {
      std::vector<ratelimit::config::config_file> files{{"q.yaml", i == 0 ? rules_a : rules_b}};
      rules[i] = ratelimit::config::load_rules(files, false, stats).rules;
      if (!rules[i]) std::abort();
    }
    service->set_rules(rules[0]);
  }
};

// Reads the input front to back; past its end, zeros.
struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  std::string bytes(std::size_t n) {
    n = std::min(n, size);
    std::string s(reinterpret_cast<const char*>(data), n);
    data += n;
    size -= n;
    return s;
  }
};

std::string report(reader& in) {
  pb::RateLimitQuotaUsageReports r;
  const auto d = in.byte();
  if (d % 4 == 1) r.set_domain("quota");
  if (d % 4 == 2) r.set_domain("other");
  const int buckets = in.byte() % 4;
  for (int i = 0; i < buckets; ++i) {
    auto* u = r.add_bucket_quota_usages();
    const int pairs = in.byte() % 3;
    for (int p = 0; p < pairs; ++p) {
      (*u->mutable_bucket_id()->mutable_bucket())["k" + std::to_string(in.byte() % 5)] =
          std::to_string(in.byte() % 3);
    }
    u->set_num_requests_allowed(in.byte() * 37);
    u->set_num_requests_denied(in.byte() % 2 ? in.byte() * 1000 : 0);
    u->mutable_time_elapsed()->set_seconds(in.byte() % 6);
  }
  return test::h2_client::frame(r.SerializeAsString());
}

// Every token bucket in the body the client received (framed responses) must obey the budgets.
void check_actions(const std::string& body) {
  for (std::size_t at = 0; at + 5 <= body.size();) {
    const std::size_t n =
        static_cast<unsigned char>(body[at + 1]) << 24 | static_cast<unsigned char>(body[at + 2]) << 16 |
        static_cast<unsigned char>(body[at + 3]) << 8 | static_cast<unsigned char>(body[at + 4]);
    if (at + 5 + n > body.size()) return;
    pb::RateLimitQuotaResponse response;
    if (!response.ParseFromArray(body.data() + at + 5, static_cast<int>(n))) std::abort();
    for (const auto& a : response.bucket_action()) {
      if (!a.has_quota_assignment_action()) continue;
      const auto& q = a.quota_assignment_action();
      if (q.assignment_time_to_live().seconds() < 1) std::abort();
      if (!q.rate_limit_strategy().has_token_bucket()) continue;
      const auto& tb = q.rate_limit_strategy().token_bucket();
      if (tb.max_tokens() < 1 || !tb.has_tokens_per_fill() || tb.fill_interval().seconds() < 1 ||
          tb.fill_interval().nanos() != 0)
        std::abort();
      // No rule allows more than 600 per minute (10 per second) over its own window.
      const double per_second =
          static_cast<double>(tb.tokens_per_fill().value()) / tb.fill_interval().seconds();
      if (per_second > 10.0 + 1e-9 || tb.max_tokens() > 600) std::abort();
    }
    at += 5 + n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static world w;
  (void)largest_budget_window;
  reader in{data, size};
  {
    test::grpc_server_side server(w.io, w.methods, net::grpc::call_limits{.max_recv_message_bytes = 4096});
    test::h2_client client;
    std::vector<std::int32_t> streams;
    const std::vector<std::pair<std::string, std::string>> headers = {{":path", path},
                                                                      {"content-type", "application/grpc"}};
    for (int steps = 0; in.size > 0 && steps < 64; ++steps) {
      const auto op = in.byte() % 8;
      const auto pick = [&]() -> std::int32_t {
        return streams.empty() ? 0 : streams[in.byte() % streams.size()];
      };
      if (op == 0 || streams.empty()) {
        streams.push_back(client.open(headers));
      } else if (op == 1 || op == 2) {
        client.send(pick(), report(in));
      } else if (op == 3) {
        client.send(pick(), in.bytes(in.byte() % 64));  // raw: a message cut anywhere, or garbage
      } else if (op == 4) {
        client.send(pick(), "", true);
      } else if (op == 5) {
        client.reset(pick());
      } else if (op == 6) {
        w.clock.advance_micros(static_cast<std::int64_t>(in.byte()) * 50'000);
        w.service->plan_now();
      } else {
        w.service->set_rules(w.rules[in.byte() % 2]);
      }
      client.pump(server.session(), w.io);
    }
    for (auto id : streams) check_actions(client.at(id).body);
  }
  w.io.poll();
  return 0;
}
