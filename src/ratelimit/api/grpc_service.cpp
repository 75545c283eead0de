#include "ratelimit/api/grpc_service.hpp"

#include <chrono>
#include <cstddef>

#include "net/grpc/call.hpp"

namespace sluice::ratelimit::api {

namespace {

using net::grpc::status_code;

status_code to_status(service::error_kind kind) {
  switch (kind) {
    case service::error_kind::invalid_argument:
      return status_code::invalid_argument;
    case service::error_kind::unavailable:
      return status_code::unavailable;
    case service::error_kind::internal:
      break;
  }
  return status_code::internal;
}

// Kept for reuse: enough spares for the decisions a worker has in flight at once (bounded, so a burst does
// not pin memory), and only messages of requests small enough that their capacity is worth keeping.
constexpr std::size_t max_spares = 256;
constexpr std::size_t max_spare_request_bytes = 4096;

}  // namespace

// One decision in flight: the call, its messages, and its start.
struct rls_grpc_service::pending {
  std::shared_ptr<net::grpc::call> call;
  std::chrono::steady_clock::time_point start;
  service::rls_request request;
  service::rls_response response;
};

rls_grpc_service::rls_grpc_service(service::rate_limit_service& service, stats::store& stats)
    : service_(service),
      total_requests_(stats.get_counter("ratelimit_server.ShouldRateLimit.total_requests")),
      response_time_(stats.get_timer("ratelimit_server.ShouldRateLimit.response_time")) {}

rls_grpc_service::~rls_grpc_service() = default;

std::unique_ptr<rls_grpc_service::pending> rls_grpc_service::take(std::shared_ptr<net::grpc::call> call) {
  std::unique_ptr<pending> p;
  if (spares_.empty()) {
    p = std::make_unique<pending>();
  } else {
    p = std::move(spares_.back());
    spares_.pop_back();
  }
  p->call = std::move(call);
  p->start = std::chrono::steady_clock::now();
  return p;
}

void rls_grpc_service::give_back(std::unique_ptr<pending> p) noexcept {
  // Only messages from small requests are kept: cleared messages keep their strings' capacity, and 256 spares
  // of 4 MB requests would pin a gigabyte.
  const bool small = p->call != nullptr && p->call->request().size() <= max_spare_request_bytes;
  p->call.reset();
  if (!small || spares_.size() >= max_spares) return;
  p->request.Clear();
  p->response.Clear();
  try {
    spares_.push_back(std::move(p));
  } catch (...) {  // out of memory: the state is simply freed
  }
}

void rls_grpc_service::add_to(net::grpc::method_table& methods) {
  methods.add("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
              [this](const std::shared_ptr<net::grpc::call>& c) { should_rate_limit(c); });
}

void rls_grpc_service::should_rate_limit(const std::shared_ptr<net::grpc::call>& call) {
  total_requests_.inc();
  auto state = take(call);
  const auto body = call->request();
  if (!state->request.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    call->finish(status_code::internal, "grpc: error unmarshalling request");
    give_back(std::move(state));
    return;
  }
  auto* p = state.get();
  // The service calls `done` exactly once, possibly before should_rate_limit returns; an exception means it
  // never started (the call's handler boundary answers INTERNAL), and then the state is still ours.
  service_.should_rate_limit(
      p->request, p->response, [this, p](const service::service_error* error) noexcept {
        std::unique_ptr<pending> owned(p);
        try {
          // After a deadline or a reset the call is done: the answer is dropped.
          if (error == nullptr) {
            owned->call->reply(owned->response);
          } else {
            owned->call->finish(to_status(error->kind), error->message);
          }
          response_time_.record(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - owned->start)
                  .count());
        } catch (...) {
          // Out of memory while answering: the client's deadline or the connection's end finishes the call.
        }
        give_back(std::move(owned));
      });
  (void)state.release();
}

}  // namespace sluice::ratelimit::api
