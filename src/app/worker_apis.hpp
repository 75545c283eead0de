#pragma once
// Part of the composition root: what each worker serves — its rate limit service (its backend connections,
// its rules snapshot), its quota service, the gRPC methods and the HTTP listener on its io_context — and how
// a new rules snapshot reaches each of them.

#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <vector>

#include "core/clock.hpp"
#include "core/health.hpp"
#include "core/per_worker.hpp"
#include "core/workers.hpp"
#include "net/grpc/health_service.hpp"
#include "net/grpc/server.hpp"
#include "net/http/server.hpp"
#include "process_settings.hpp"
#include "ratelimit/api/grpc_service.hpp"
#include "ratelimit/backends/module.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/rlqs/quota_service.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/service/table_lookup.hpp"
#include "ratelimit/settings.hpp"
#include "shared_apis.hpp"
#include "stats/store.hpp"
#include "tracing_setup.hpp"

namespace sluice {

struct worker_apis {
  boost::asio::io_context* io = nullptr;     // this worker's: its HTTP listener is made on it
  std::unique_ptr<stats::top_recorder> top;  // null when TOP_DESCRIPTORS_CAPACITY is 0; outlives the service
  std::unique_ptr<ratelimit::service::table_lookup> tables;  // the limit tables; outlives the service
  std::unique_ptr<ratelimit::service::rate_limit_service> service;
  std::unique_ptr<ratelimit::api::rls_grpc_service> rls;
  std::unique_ptr<ratelimit::rlqs::quota_service> quota;
  std::unique_ptr<net::grpc::health_service> grpc_health;
  std::shared_ptr<net::http::router> routes;
  std::unique_ptr<net::http::server> http;  // made by listen_http, once the first rules are in
};

// What the workers are built from (all outlive them).
struct worker_wiring {
  const ratelimit::module_settings& rl;
  ratelimit::limiter::limiter& limiter;
  ratelimit::backends::module& backend;
  stats::store& stats;
  core::health& health;
  shared_apis& shared;
  net::grpc::server& grpc;
  const tracing_holder& tracing;
  ratelimit::rlqs::demand_exchange& demand;
  ratelimit::service::redis_tables_health& redis_tables;
  bool reflection;  // REFLECTION_ENABLED
};

// Per worker: the services, their HTTP routes and gRPC methods; Health/Watch hears every health change.
void build_workers(core::per_worker<worker_apis>& apis, const worker_wiring& w);
// One HTTP listening socket per worker on the same port. Only once the first rules are in: a port that
// listened before would take connections nobody answers. Returns the endpoint bound.
boost::asio::ip::tcp::endpoint listen_http(core::per_worker<worker_apis>& apis, const process_settings& proc);
// A reload hands each worker's services the new snapshot, on the worker's own thread.
ratelimit::service::rules_source::publish_fn publish_to(core::per_worker<worker_apis>& apis);
// A limit tables change hands each worker's lookup the new tables, on the worker's own thread.
ratelimit::service::limit_tables_source::publish_fn publish_tables_to(core::per_worker<worker_apis>& apis);
// On each worker's thread: the quota services start (or stop) planning.
void start_quota(core::per_worker<worker_apis>& apis);
void stop_quota(core::per_worker<worker_apis>& apis);
// HTTP connections still open, over the workers.
std::size_t open_http(const core::per_worker<worker_apis>& apis);

}  // namespace sluice
