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

constexpr std::string_view method_path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

// The server span's end, as OpenTelemetry's gRPC instrumentation records it: the status code, and status
// ERROR for the codes that are the server's fault.
void end_server_span(tracing::span& span, status_code code, std::string_view message) {
  if (!span.recording()) return;
  span.set_attribute("rpc.grpc.status_code", static_cast<std::int64_t>(code));
  switch (code) {
    case status_code::unknown:
    case status_code::deadline_exceeded:
    case status_code::unimplemented:
    case status_code::internal:
    case status_code::unavailable:
    case status_code::data_loss:
      span.set_error(std::string(message));
      break;
    default:
      break;
  }
  span.end();
}

// Kept for reuse: enough spares for the decisions a worker has in flight at once (bounded, so a burst does
// not pin memory), and only messages of requests small enough that their capacity is worth keeping.
constexpr std::size_t max_spares = 256;
constexpr std::size_t max_spare_request_bytes = 4096;

}  // namespace

// One decision in flight: the call, its messages, its start and its server span.
struct rls_grpc_service::pending {
  std::shared_ptr<net::grpc::call> call;
  std::chrono::steady_clock::time_point start;
  tracing::span server;
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
  p->server.end();  // a span left open by an exception
  if (!small || spares_.size() >= max_spares) return;
  p->request.Clear();
  p->response.Clear();
  try {
    spares_.push_back(std::move(p));
  } catch (...) {  // out of memory: the state is simply freed
  }
}

void rls_grpc_service::add_to(net::grpc::method_table& methods) {
  methods.add(std::string(method_path),
              [this](const std::shared_ptr<net::grpc::call>& c) { should_rate_limit(c); });
  if (tracer_ != nullptr) {
    for (auto name : tracing::context_headers) methods.keep_header(std::string(name));
  }
}

void rls_grpc_service::should_rate_limit(const std::shared_ptr<net::grpc::call>& call) {
  total_requests_.inc();
  auto state = take(call);
  if (tracer_ != nullptr) {
    std::optional<tracing::span_context> parent;
    if (call->kept_headers())
      parent = tracing::extract([&call](std::string_view name) { return call->header(name); });
    state->server = tracer_->start(method_path.substr(1), tracing::span_kind::server, parent);
    if (state->server.recording()) {
      state->server.set_attribute("rpc.system", std::string("grpc"));
      state->server.set_attribute("rpc.service", std::string("envoy.service.ratelimit.v3.RateLimitService"));
      state->server.set_attribute("rpc.method", std::string("ShouldRateLimit"));
    }
  }
  const auto body = call->request();
  if (!state->request.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    constexpr std::string_view message = "grpc: error unmarshalling request";
    end_server_span(state->server, status_code::internal, message);
    call->finish(status_code::internal, message);
    give_back(std::move(state));
    return;
  }
  auto* p = state.get();
  // The service calls `done` exactly once, possibly before should_rate_limit returns; an exception means it
  // never started (the call's handler boundary answers INTERNAL), and then the state is still ours.
  service_.should_rate_limit(
      p->request, p->response,
      [this, p](const service::service_error* error) noexcept {
        std::unique_ptr<pending> owned(p);
        try {
          // After a deadline or a reset the call is done: the answer is dropped.
          if (error == nullptr) {
            end_server_span(owned->server, status_code::ok, {});
            owned->call->reply(owned->response);
          } else {
            end_server_span(owned->server, to_status(error->kind), error->message);
            owned->call->finish(to_status(error->kind), error->message);
          }
          response_time_.record_since(owned->start);
        } catch (...) {
          // Out of memory while answering: the client's deadline or the connection's end finishes the call.
        }
        give_back(std::move(owned));
      },
      &p->server);
  (void)state.release();
}

}  // namespace sluice::ratelimit::api
