#include "ratelimit/api/grpc_service.hpp"

#include <google/protobuf/arena.h>

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

// One decision in flight: the call, its messages on an arena whose first block is inline, and its start.
class pending {
 public:
  static constexpr std::size_t first_block_bytes = 2048;

  explicit pending(std::shared_ptr<net::grpc::call> c)
      : call(std::move(c)), start(std::chrono::steady_clock::now()), arena_(options(block_)) {
    request = google::protobuf::Arena::CreateMessage<service::rls_request>(&arena_);
    response = google::protobuf::Arena::CreateMessage<service::rls_response>(&arena_);
  }

  std::shared_ptr<net::grpc::call> call;
  std::chrono::steady_clock::time_point start;
  service::rls_request* request;
  service::rls_response* response;

 private:
  static google::protobuf::ArenaOptions options(char* block) {
    google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = first_block_bytes;
    return o;
  }

  alignas(std::max_align_t) char block_[first_block_bytes];  // before arena_: it must exist first
  google::protobuf::Arena arena_;
};

}  // namespace

void rls_grpc_service::add_to(net::grpc::method_table& methods) {
  methods.add("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
              [this](const std::shared_ptr<net::grpc::call>& c) { should_rate_limit(c); });
}

void rls_grpc_service::should_rate_limit(const std::shared_ptr<net::grpc::call>& call) {
  total_requests_.inc();
  auto state = std::make_unique<pending>(call);
  const auto body = call->request();
  if (!state->request->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    call->finish(status_code::internal, "grpc: error unmarshalling request");
    return;
  }
  auto* p = state.get();
  // The service calls `done` exactly once, possibly before should_rate_limit returns; an exception means it
  // never started (the call's handler boundary answers INTERNAL), and then the state is still ours.
  service_.should_rate_limit(
      *p->request, *p->response, [this, p](const service::service_error* error) noexcept {
        std::unique_ptr<pending> owned(p);
        try {
          // After a deadline or a reset the call is done: the answer is dropped.
          if (error == nullptr) {
            owned->call->reply(*owned->response);
          } else {
            owned->call->finish(to_status(error->kind), error->message);
          }
          response_time_.record(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - owned->start)
                  .count());
        } catch (...) {
          // Out of memory while answering: the client's deadline or the connection's end finishes the call.
        }
      });
  (void)state.release();
}

}  // namespace sluice::ratelimit::api
