#pragma once
// Part of the composition root: what a stop does, in order, on the control thread — unhealthy, no new
// connections, GOAWAY on gRPC (open quota and Watch streams end with UNAVAILABLE, so their clients reconnect
// elsewhere), the requests in flight may finish within the grace period, then the backends and the workers
// stop.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <vector>

#include "control_listeners.hpp"
#include "core/health.hpp"
#include "core/workers.hpp"
#include "net/grpc/server.hpp"
#include "ratelimit/backends/module.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/xds/client.hpp"
#include "shared_apis.hpp"
#include "tracing_setup.hpp"
#include "worker_apis.hpp"

namespace sluice {

struct shutdown_plan {
  boost::asio::io_context& control;
  core::worker_pool& workers;
  core::health& health;
  std::size_t sigterm_component;
  core::per_worker<worker_apis>& apis;
  net::grpc::server& grpc;
  ratelimit::service::rules_source& rules;
  ratelimit::service::limit_tables_source& tables;
  ratelimit::xds::client* xds;  // null with rule files
  shared_apis& shared;
  control_listeners& listeners;
  ratelimit::backends::module& backend;
  ratelimit::rlqs::demand_exchange& demand;
  const tracing_holder& tracing;
  std::function<void()> release_control;  // lets the control thread's run() return
  std::chrono::milliseconds grace;
  boost::asio::steady_timer timer{control};
  boost::asio::steady_timer drain_timer{control};  // bounds the wait for the backend's unsent hits
  bool stopping = false;
  bool finished = false;

  // Thread-safe.
  void begin();
  // The last step (backends, tracing, workers), once: on the control thread.
  void finish();
};

}  // namespace sluice
