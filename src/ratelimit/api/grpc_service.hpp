#pragma once
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit on Sluice's gRPC server (net/grpc), one
// instance per worker. A call's request and response live on one protobuf arena whose first block is part
// of the call's state: a decision costs one allocation for all its messages. The answer goes out from
// wherever the decision completes (inline for the memory backend, after Redis I/O otherwise), always on the
// worker's thread.

#include "net/grpc/method_table.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::api {

class rls_grpc_service {
 public:
  rls_grpc_service(service::rate_limit_service& service, stats::store& stats)
      : service_(service),
        total_requests_(stats.get_counter("ratelimit_server.ShouldRateLimit.total_requests")),
        response_time_(stats.get_timer("ratelimit_server.ShouldRateLimit.response_time")) {}

  void add_to(net::grpc::method_table& methods);

 private:
  void should_rate_limit(const std::shared_ptr<net::grpc::call>& call);

  service::rate_limit_service& service_;
  // upstream's gRPC metrics interceptor: every call, and its time in milliseconds.
  stats::counter& total_requests_;
  stats::timer& response_time_;
};

}  // namespace sluice::ratelimit::api
