#pragma once
// Part of the composition root: what runs on the control thread besides the file watches — the Prometheus
// listener, the statsd / DogStatsD / stdout sink and the debug server (with the operator's pages).

#include <boost/asio/io_context.hpp>
#include <memory>

#include "net/http/server.hpp"
#include "process_settings.hpp"
#include "ratelimit/api/admin_tokens.hpp"
#include "ratelimit/api/operator_pages.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "stats/flusher.hpp"
#include "stats/prometheus_exporter.hpp"
#include "stats/sink_settings.hpp"
#include "stats/store.hpp"
#include "worker_apis.hpp"

namespace sluice {

// The listeners and sinks of the control thread: Prometheus, the statsd/DogStatsD/stdout sink, the debug
// server.
struct control_listeners {
  std::unique_ptr<net::http::server> prometheus;
  std::unique_ptr<stats::flusher> line_sink;  // statsd, DogStatsD or stdout, flushed on its own thread
  std::unique_ptr<ratelimit::api::operator_pages> operator_view;  // /top and /dashboard: outlives the server
  std::unique_ptr<ratelimit::api::admin_tokens> admin_tokens;     // ADMIN_TOKEN_FILE (null: unset)
  std::unique_ptr<net::http::server> debug;

  void stop() {
    if (debug) debug->stop();
    if (operator_view) operator_view->stop();
    if (admin_tokens) admin_tokens->stop();
    if (prometheus) prometheus->stop();
  }
};

// What the debug server's operator pages read (all outlive them).
struct debug_sources {
  core::per_worker<worker_apis>& apis;
  const ratelimit::service::rules_source& rules;
  const core::health& health;
  stats::store& stats;
  const core::clock& clock;  // the workers' wall clock: the top lists' slots are its seconds
  std::string backend_type;
};

// Throws core::settings_error when PROMETHEUS_ADDR cannot be listened on, or ADMIN_TOKEN_FILE not read; a
// debug listener that cannot be opened is only logged, as upstream.
void start_control_listeners(control_listeners& l, const process_settings& proc,
                             const stats::sink_settings& stats_settings,
                             stats::prometheus_exporter* prometheus,
                             const ratelimit::service::rules_source& rules, stats::store& stats,
                             debug_sources sources, boost::asio::io_context& control);

}  // namespace sluice
