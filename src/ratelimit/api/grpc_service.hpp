#pragma once
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit on Sluice's gRPC server (net/grpc), one
// instance per worker. A call's request and response messages are taken from the worker's spares and given
// back cleared, so a steady load parses into messages whose strings and repeated fields are already
// allocated. The answer goes out from wherever the decision completes (inline for the memory backend, after
// Redis I/O otherwise), always on the worker's thread.

#include <memory>
#include <vector>

#include "net/grpc/method_table.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"
#include "tracing/tracer.hpp"

namespace sluice::ratelimit::api {

class rls_grpc_service {
 public:
  rls_grpc_service(service::rate_limit_service& service, stats::store& stats);

  ~rls_grpc_service();
  rls_grpc_service(const rls_grpc_service&) = delete;
  rls_grpc_service& operator=(const rls_grpc_service&) = delete;

  // Also asks the table to keep the trace context headers when tracing is on.
  void add_to(net::grpc::method_table& methods);
  // Tracing on this worker (set before add_to): the call's server span, under the context it came with.
  void set_tracer(tracing::tracer* tracer) { tracer_ = tracer; }

  struct pending;

 private:
  void should_rate_limit(const std::shared_ptr<net::grpc::call>& call);
  std::unique_ptr<pending> take(std::shared_ptr<net::grpc::call> call);
  void give_back(std::unique_ptr<pending> p) noexcept;

  service::rate_limit_service& service_;
  // upstream's gRPC metrics interceptor: every call, and its time in milliseconds.
  stats::counter& total_requests_;
  stats::timer& response_time_;
  std::vector<std::unique_ptr<pending>> spares_;
  tracing::tracer* tracer_ = nullptr;
};

}  // namespace sluice::ratelimit::api
