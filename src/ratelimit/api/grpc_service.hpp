#pragma once
// envoy.service.ratelimit.v3.RateLimitService on gRPC's callback API. The reactor is finished from wherever
// the decision completes: inline on the gRPC thread when the backend needs no I/O (memory), from the
// io_context otherwise — so a memory-backed decision pays no thread hop.

#include "net/grpc/arena_allocator.hpp"
#include "net/grpc/call_tracker.hpp"
#include "ratelimit/service/service.hpp"
#include "rls.grpc.pb.h"
#include "stats/store.hpp"

namespace sluice::ratelimit::api {

class rls_grpc_service final : public envoy::service::ratelimit::v3::RateLimitService::CallbackService {
 public:
  rls_grpc_service(service::rate_limit_service& service, net::grpc::call_tracker& calls, stats::store& stats)
      : service_(service),
        calls_(calls),
        total_requests_(stats.get_counter("ratelimit_server.ShouldRateLimit.total_requests")),
        response_time_(stats.get_timer("ratelimit_server.ShouldRateLimit.response_time")) {
    SetMessageAllocatorFor_ShouldRateLimit(&allocator_);
  }

  ::grpc::ServerUnaryReactor* ShouldRateLimit(::grpc::CallbackServerContext* context,
                                              const service::rls_request* request,
                                              service::rls_response* response) override;

 private:
  service::rate_limit_service& service_;
  net::grpc::call_tracker& calls_;
  // upstream's gRPC metrics interceptor: every call, and its time in milliseconds.
  stats::counter& total_requests_;
  stats::timer& response_time_;
  net::grpc::arena_allocator<service::rls_request, service::rls_response> allocator_;
};

}  // namespace sluice::ratelimit::api
