#include "ratelimit/api/http_handlers.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "ratelimit/api/json_codec.hpp"

namespace sluice::ratelimit::api {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

using decision = std::optional<service::service_error>;

// Awaits a decision. The service may complete inline or on another thread; the coroutine is always resumed
// through its own executor, never from inside the service's call stack.
asio::awaitable<decision> decide(service::rate_limit_service& service, const service::rls_request& request,
                                 service::rls_response& response) {
  auto ex = co_await asio::this_coro::executor;
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(decision)>(
      [&](auto handler) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        service.should_rate_limit(request, response, [shared, ex](const service::service_error* error) {
          asio::post(ex, [shared, result = error ? decision(*error) : decision()]() mutable {
            std::move (*shared)(std::move(result));
          });
        });
      },
      asio::use_awaitable);
}

http::status to_http_status(service::error_kind kind) {
  switch (kind) {
    case service::error_kind::invalid_argument: return http::status::bad_request;
    case service::error_kind::unavailable: return http::status::service_unavailable;
    case service::error_kind::internal: break;
  }
  return http::status::internal_server_error;
}

}  // namespace

void add_http_routes(net::http::router& routes, service::rate_limit_service& service, const core::health& health) {
  routes.add("/json", [&service](const net::http::request& req) -> asio::awaitable<net::http::response> {
    service::rls_request request;
    if (auto error = parse_request_json(req.body(), request)) {
      co_return net::http::json_error(req, http::status::bad_request, *error);
    }
    service::rls_response response;
    if (auto error = co_await decide(service, request, response)) {
      co_return net::http::json_error(req, to_http_status(error->kind), error->message);
    }
    auto status = response.overall_code() == service::rls_response::OVER_LIMIT ? http::status::too_many_requests
                                                                                 : http::status::ok;
    co_return net::http::make_response(req, status, "application/json", response_to_json(response));
  });

  routes.add("/healthcheck", [&health](const net::http::request& req) -> asio::awaitable<net::http::response> {
    if (health.healthy()) co_return net::http::make_response(req, http::status::ok, "text/plain", "OK");
    co_return net::http::make_response(req, http::status::internal_server_error, "text/plain", "");
  });
}

}  // namespace sluice::ratelimit::api
