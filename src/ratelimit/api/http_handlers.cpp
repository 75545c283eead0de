#include "ratelimit/api/http_handlers.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <utility>

#include "ratelimit/api/json_codec.hpp"
#include "tracing/proto_text.hpp"

namespace sluice::ratelimit::api {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

using decision = std::optional<service::service_error>;

// Awaits a decision without suspending when the service completes inline (the memory backend); otherwise the
// coroutine is resumed through its own executor, never from inside the service's call stack. The state lives
// in the coroutine frame, which stays alive until the decision arrives. A decision completes on this worker's
// thread (its store connections run here): no lock.
asio::awaitable<decision> decide(service::rate_limit_service& service, const service::rls_request& request,
                                 service::rls_response& response, const tracing::span& server) {
  struct pending {
    asio::any_io_executor executor;
    bool done = false;
    decision result;
    std::function<void()> resume;
  } state;
  state.executor = co_await asio::this_coro::executor;

  service.should_rate_limit(
      request, response,
      [&state](const service::service_error* error) {
        if (error != nullptr) state.result = *error;
        state.done = true;
        if (state.resume) asio::post(state.executor, std::exchange(state.resume, nullptr));
      },
      &server);
  if (state.done) co_return std::move(state.result);
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(decision)>(
      [&state](auto handler) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        auto resume = [shared, &state] { std::move (*shared)(std::move(state.result)); };
        if (state.done) {
          asio::post(state.executor, std::move(resume));
        } else {
          state.resume = std::move(resume);
        }
      },
      asio::use_awaitable);
}

// Whether a header of the request could be one extract() reads (by length and first letter): most requests
// carry none, and then the three case-insensitive searches are not made.
bool may_carry_context(const net::http::request& req) {
  for (const auto& field : req) {
    const std::string_view name = field.name_string();
    if (name.empty()) continue;
    const char first = static_cast<char>(std::tolower(static_cast<unsigned char>(name[0])));
    for (auto kept : tracing::context_headers) {
      if (kept.size() == name.size() && kept[0] == first) return true;
    }
  }
  return false;
}

// The request's server span (upstream has none: its /json spans start a trace of their own), named as
// OpenTelemetry's HTTP instrumentation names it, under the trace context the request came with.
tracing::span start_server_span(tracing::tracer& tracer, const net::http::request& req) {
  std::optional<tracing::span_context> parent;
  if (may_carry_context(req)) {
    parent = tracing::extract([&req](std::string_view name) -> std::optional<std::string_view> {
      auto it = req.find(name);
      if (it == req.end()) return std::nullopt;
      return std::string_view(it->value());
    });
  }
  const std::string_view method = req.method_string();
  auto server = tracer.start(std::string(method) + " /json", tracing::span_kind::server, parent);
  if (server.recording()) {
    server.set_attribute("http.method", std::string(method));
    server.set_attribute("http.target", std::string(req.target()));
  }
  return server;
}

net::http::response end_server_span(tracing::span& server, net::http::response response) {
  if (server.recording()) {
    const auto status = response.result_int();
    server.set_attribute("http.status_code", static_cast<std::int64_t>(status));
    if (status >= 500) server.set_error({});
    server.end();
  }
  return response;
}

// The /json decisions' own stats, beside gRPC's ratelimit_server.ShouldRateLimit.*: the dashboard counts
// both.
struct json_stats {
  explicit json_stats(stats::store& stats)
      : total_requests(stats.get_counter(json_total_requests)),
        response_time(stats.get_timer(json_response_time)) {}
  stats::counter& total_requests;
  stats::timer& response_time;
};

// Records the time from its making to its end.
struct timed {
  stats::timer& timer;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~timed() { timer.record_since(start); }
};

// (One coroutine per request, with or without tracing: a second one cost 1.3% of a /json decision.)
asio::awaitable<net::http::response> handle_json(service::rate_limit_service& service, json_stats& stats,
                                                 tracing::tracer* tracer, const net::http::request& req) {
  stats.total_requests.inc();
  const timed time{stats.response_time};
  tracing::span server;
  if (tracer != nullptr) server = start_server_span(*tracer, req);
  // One arena per request: the request and response messages cost one allocation instead of one per field.
  // (Not an initial block in the coroutine frame: frames are not aligned enough for the arena.)
  google::protobuf::ArenaOptions options;
  options.start_block_size = 2048;
  google::protobuf::Arena arena(options);
  auto& request = *google::protobuf::Arena::CreateMessage<service::rls_request>(&arena);
  if (auto error = parse_request_json(req.body(), request)) {
    co_return end_server_span(server, net::http::json_error(req, http::status::bad_request, *error));
  }
  auto& response = *google::protobuf::Arena::CreateMessage<service::rls_response>(&arena);
  // (The co_await outside the condition: g++ 12 mishandles temporaries of a co_await in one.)
  const auto error = co_await decide(service, request, response, server);
  if (error) {
    co_return end_server_span(server,
                              net::http::json_error(req, to_http_status(error->kind), error->message));
  }
  if (tracer != nullptr) {
    // upstream's span for the rest of its handler, with the response as Go prints it.
    auto remaining = tracer->start_child(server, "NewJsonHandler Remaining Execution");
    if (remaining.recording()) remaining.set_attribute("response", tracing::go_text(response));
  }
  auto status = response.overall_code() == service::rls_response::OVER_LIMIT ? http::status::too_many_requests
                                                                             : http::status::ok;
  co_return end_server_span(
      server, net::http::make_response(req, status, "application/json", response_to_json(response)));
}

}  // namespace

http::status to_http_status(service::error_kind kind) {
  switch (kind) {
    case service::error_kind::invalid_argument:
      return http::status::bad_request;
    case service::error_kind::unavailable:
      return http::status::service_unavailable;
    case service::error_kind::internal:
      break;
  }
  return http::status::internal_server_error;
}

void add_http_routes(net::http::router& routes, service::rate_limit_service& service, stats::store& stats,
                     const core::health& health, tracing::tracer* tracer) {
  routes.add("/json",
             [&service, tracer, counted = std::make_shared<json_stats>(stats)](
                 const net::http::request& req) { return handle_json(service, *counted, tracer, req); });

  routes.add("/healthcheck",
             [&health](const net::http::request& req) -> asio::awaitable<net::http::response> {
               if (health.healthy())
                 co_return net::http::make_response(req, http::status::ok, "text/plain", "OK");
               co_return net::http::make_response(req, http::status::internal_server_error, "text/plain", "");
             });
}

}  // namespace sluice::ratelimit::api
