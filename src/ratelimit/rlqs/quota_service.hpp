#pragma once
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService on one worker. Each stream is one client (one
// Envoy, one gRPC channel); each bucket it reports joins the worker's group for that bucket. Every plan
// period the worker publishes its clients' demand per bucket to the demand exchange, reads the fleet's, and
// plans max-min fair shares of the bucket's budget (fair_share.hpp); a client whose share moved by more than
// push_threshold, or whose assignment nears the end of its time to live, gets a new one unasked. A bucket's
// first report is answered at once. Everything runs on the worker's thread; only the exchange is shared.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "net/grpc/method_table.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/rlqs/bucket_group.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/rlqs/settings.hpp"
#include "stats/store.hpp"
#include "tracing/tracer.hpp"

namespace sluice::ratelimit::rlqs {

class quota_stream;
struct worker_state;

// The process-wide part: the stream and bucket gauges, shared by the workers.
struct service_stats {
  stats::gauge* active_streams = nullptr;  // ratelimit.rlqs.active_streams
  stats::gauge* active_buckets = nullptr;  // ratelimit.rlqs.active_buckets: (stream, bucket) pairs
  stats::counter* reports = nullptr;       // ratelimit.rlqs.reports: usage messages received
  static service_stats make(stats::store& store);
};

class quota_service {
 public:
  quota_service(const settings& s, std::size_t worker, demand_exchange& exchange, const core::clock& clock,
                stats::store& store, boost::asio::any_io_executor ex);
  ~quota_service();
  quota_service(const quota_service&) = delete;
  quota_service& operator=(const quota_service&) = delete;

  // Before add_to: a span per usage report (null: no tracing).
  void set_tracer(tracing::tracer* t);
  void add_to(net::grpc::method_table& methods);
  // A new rules snapshot (on the worker's thread): every bucket is matched again; changed assignments go out
  // with the next plan.
  void set_rules(std::shared_ptr<const config::rule_set> rules);
  // Starts planning every plan period; stop() ends it.
  void start();
  void stop();
  // One plan period's work, now (the fuzzer drives planning by its input instead of a timer).
  void plan_now();

 private:
  std::shared_ptr<worker_state> state_;
};

}  // namespace sluice::ratelimit::rlqs
