#include "ratelimit/api/grpc_service.hpp"

#include <chrono>

#include "core/log.hpp"

namespace sluice::ratelimit::api {

namespace {

::grpc::Status to_status(const service::service_error& e) {
  switch (e.kind) {
    case service::error_kind::invalid_argument:
      return {::grpc::StatusCode::INVALID_ARGUMENT, e.message};
    case service::error_kind::unavailable:
      return {::grpc::StatusCode::UNAVAILABLE, e.message};
    case service::error_kind::internal:
      break;
  }
  return {::grpc::StatusCode::INTERNAL, e.message};
}

}  // namespace

::grpc::ServerUnaryReactor* rls_grpc_service::ShouldRateLimit(::grpc::CallbackServerContext* context,
                                                              const service::rls_request* request,
                                                              service::rls_response* response) {
  auto* reactor = context->DefaultReactor();
  total_requests_.inc();
  const auto start = std::chrono::steady_clock::now();
  auto finish = [this, reactor, start](const ::grpc::Status& status) {
    reactor->Finish(status);
    response_time_.record(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  };
  if (!calls_.enter()) {
    finish({::grpc::StatusCode::UNAVAILABLE, "the server is shutting down"});
    return reactor;
  }
  try {
    service_.should_rate_limit(*request, *response, [this, finish](const service::service_error* error) {
      finish(error == nullptr ? ::grpc::Status::OK : to_status(*error));
      calls_.leave();
    });
  } catch (const std::exception& e) {
    // should_rate_limit reports its own failures through the callback; reaching here means it never started.
    core::log_error("ShouldRateLimit failed: ", e.what());
    finish({::grpc::StatusCode::INTERNAL, "internal error"});
    calls_.leave();
  }
  return reactor;
}

}  // namespace sluice::ratelimit::api
