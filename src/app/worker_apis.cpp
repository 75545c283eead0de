#include "worker_apis.hpp"

#include <boost/asio/post.hpp>

#include "core/strings.hpp"
#include "net/grpc/reflection_service.hpp"
#include "ratelimit/api/http_handlers.hpp"

namespace sluice {

namespace asio = boost::asio;

void build_workers(std::vector<worker_apis>& apis, core::worker_pool& workers, const worker_wiring& w) {
  auto& check_requests = w.stats.get_counter("ratelimit_server.Check.total_requests");
  // The quota service measures intervals only: a clock that NTP cannot step (static: the streams' state may
  // outlive the services by a little at exit).
  static const core::steady_clock quota_clock;
  for (unsigned i = 0; i < workers.size(); ++i) {
    auto& a = apis.emplace_back();
    a.service = std::make_unique<ratelimit::service::rate_limit_service>(w.rl.service, w.limiter,
                                                                         w.backend.get(i), w.stats);
    a.service->set_tracer(w.tracing.tracer(i));
    a.tables = std::make_unique<ratelimit::service::table_lookup>(
        w.rl.tables.redis_ttl, w.backend.table_reader(i), &w.redis_table_rows, &w.redis_tables);
    a.service->set_table_lookup(a.tables.get());
    if (w.rl.top_descriptors_capacity > 0) {
      a.top = std::make_unique<stats::top_recorder>(w.rl.top_descriptors_capacity,
                                                    w.rl.top_descriptors_hash_values);
      a.service->set_top_recorder(a.top.get());
    }
    a.routes = std::make_shared<net::http::router>();
    ratelimit::api::add_http_routes(*a.routes, *a.service, w.stats, w.health, w.tracing.tracer(i));
    w.shared.add_routes(*a.routes);

    auto methods = std::make_shared<net::grpc::method_table>();
    a.rls = std::make_unique<ratelimit::api::rls_grpc_service>(*a.service, w.stats);
    a.rls->set_tracer(w.tracing.tracer(i));
    a.rls->add_to(*methods);
    a.quota = std::make_unique<ratelimit::rlqs::quota_service>(w.rl.rlqs, i, w.demand, quota_clock, w.stats,
                                                               workers.context(i).get_executor());
    a.quota->set_tracer(w.tracing.tracer(i));
    a.quota->add_to(*methods);
    a.grpc_health = std::make_unique<net::grpc::health_service>(
        "ratelimit", [&health = w.health] { return health.healthy(); },
        [&check_requests] { check_requests.inc(); });
    a.grpc_health->add_to(*methods);
    if (w.reflection) net::grpc::reflection_service::add_to(*methods);
    w.grpc.add_worker(workers.context(i), std::move(methods));
  }
  w.health.on_change([&workers, &apis](bool) {
    for (unsigned i = 0; i < workers.size(); ++i)
      asio::post(workers.context(i), [&h = *apis[i].grpc_health] { h.notify(); });
  });
}

asio::ip::tcp::endpoint listen_http(std::vector<worker_apis>& apis, core::worker_pool& workers,
                                    const process_settings& proc) {
  asio::ip::tcp::endpoint endpoint;
  auto options = proc.http;
  options.reuse_port = workers.size() > 1;
  options.check_port_free = true;  // the first socket: another process's listener is refused, not joined
  for (unsigned i = 0; i < workers.size(); ++i) {
    apis[i].http = std::make_unique<net::http::server>(workers.context(i), options, apis[i].routes);
    try {
      endpoint = apis[i].http->listen();
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(core::cat("Failed to open HTTP listener: ", e.what()));  // upstream's words
    }
    options.port = endpoint.port();  // port 0: the other workers bind the port the first got
    options.check_port_free = false;
  }
  return endpoint;
}

ratelimit::service::rules_source::publish_fn publish_to(core::worker_pool& workers,
                                                        std::vector<worker_apis>& apis) {
  return [&workers, &apis](std::shared_ptr<const ratelimit::config::rule_set> snapshot) {
    for (unsigned i = 0; i < workers.size(); ++i) {
      asio::post(workers.context(i), [&a = apis[i], snapshot] {
        a.service->set_rules(snapshot);
        a.quota->set_rules(snapshot);
      });
    }
  };
}

ratelimit::service::limit_tables_source::publish_fn publish_tables_to(core::worker_pool& workers,
                                                                      std::vector<worker_apis>& apis) {
  return [&workers, &apis](std::shared_ptr<const ratelimit::service::table_set> tables) {
    for (unsigned i = 0; i < workers.size(); ++i)
      asio::post(workers.context(i), [&a = apis[i], tables] { a.tables->set_tables(tables); });
  };
}

void start_quota(core::worker_pool& workers, std::vector<worker_apis>& apis) {
  for (unsigned i = 0; i < workers.size(); ++i)
    asio::post(workers.context(i), [&q = *apis[i].quota] { q.start(); });
}

void stop_quota(core::worker_pool& workers, std::vector<worker_apis>& apis) {
  for (unsigned i = 0; i < workers.size(); ++i)
    asio::post(workers.context(i), [&q = *apis[i].quota] { q.stop(); });
}

std::size_t open_http(const std::vector<worker_apis>& apis) {
  std::size_t n = 0;
  for (const auto& w : apis) n += w.http->open_connections();
  return n;
}

}  // namespace sluice
