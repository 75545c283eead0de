#pragma once
// The rate limit service's HTTP surface: POST /json (the decision in the proto3 JSON mapping; 200 when OK,
// 429 when over limit) and GET /healthcheck (200 "OK", or 500 with an empty body when unhealthy).

#include "core/health.hpp"
#include "net/http/router.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"
#include "tracing/tracer.hpp"

namespace sluice::ratelimit::api {

// The stats of the /json decisions (Sluice's own; upstream has none): how many, and how long each took
// (milliseconds, as ShouldRateLimit's response_time).
inline constexpr std::string_view json_total_requests = "ratelimit.http.json.total_requests";
inline constexpr std::string_view json_response_time = "ratelimit.http.json.response_time";

// The HTTP status of a service error: 400, 503 or 500 (the /json API, the counters API and explain).
boost::beast::http::status to_http_status(service::error_kind kind);

// `tracer`: this worker's, when tracing is on (spans for /json), else null.
void add_http_routes(net::http::router& routes, service::rate_limit_service& service, stats::store& stats,
                     const core::health& health, tracing::tracer* tracer);

}  // namespace sluice::ratelimit::api
