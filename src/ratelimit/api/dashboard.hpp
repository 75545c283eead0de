#pragma once
// The operator's view on the debug listener (docs/guides/observe/dashboard.md): /top's JSON, the /dashboard
// page (a self-contained HTML file compiled in) and the JSON it polls, /dashboard/data. Built on the control
// thread from copies: the series history, the rules snapshot, the reload list, the health components and the
// workers' top lists merged.

#include <string>
#include <string_view>

#include "core/health.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "stats/series_history.hpp"
#include "stats/store.hpp"
#include "stats/top_descriptors.hpp"

namespace sluice::ratelimit::api {

// The counters the dashboard's totals follow, by their JSON names.
struct dashboard_totals {
  static constexpr std::string_view grpc_requests = "ratelimit_server.ShouldRateLimit.total_requests";
  static constexpr std::string_view json_requests = "ratelimit.http.json.total_requests";
  static constexpr std::string_view backend_errors = "ratelimit.service.call.should_rate_limit.redis_error";
  static constexpr std::string_view fail_open = "ratelimit.service.fail_open";
  // The decisions' latency: over gRPC and /json together.
  static constexpr std::string_view latency_timer = "ratelimit_server.ShouldRateLimit.response_time";
  static constexpr std::string_view json_latency_timer = "ratelimit.http.json.response_time";
};

// {"window_seconds": …, "over_limit": [{"domain", "entries", "rule", "count"}, …], "hits": [ … ]}
std::string top_json(const stats::top_lists& top);

struct dashboard_inputs {
  const stats::series_history& history;
  const service::rules_source& rules;
  const core::health& health;
  const stats::top_lists& top;  // merged with room for utilisation; the page shows `shown_top` of each
  std::size_t shown_top = 10;
  std::string_view backend_type;  // BACKEND_TYPE
  double now = 0;                 // unix seconds
  double interval_seconds = 1;
  // REDIS_REGION: the ratelimit.redis_region.* gauges are read from here (null: no regions shown).
  const stats::store* stats = nullptr;
};

// At most this many rule series go to the page: the most throttled, then the busiest.
inline constexpr std::size_t dashboard_rules_shown = 40;

std::string dashboard_json(const dashboard_inputs& in);

// The page itself (src/ratelimit/api/dashboard.html).
extern const std::string_view dashboard_html;

}  // namespace sluice::ratelimit::api
