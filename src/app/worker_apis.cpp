#include "worker_apis.hpp"

#include "core/strings.hpp"
#include "net/grpc/reflection_service.hpp"
#include "ratelimit/api/http_handlers.hpp"

namespace sluice {

namespace asio = boost::asio;

void build_workers(core::per_worker<worker_apis>& apis, const worker_wiring& w) {
  auto& check_requests = w.stats.get_counter("ratelimit_server.Check.total_requests");
  // The quota service measures intervals only: a clock that NTP cannot step (static: the streams' state may
  // outlive the services by a little at exit).
  static const core::steady_clock quota_clock;
  apis.build([&](worker_apis& a, unsigned i, asio::io_context& io) {
    a.io = &io;
    a.service = std::make_unique<ratelimit::service::rate_limit_service>(w.rl.service, w.limiter,
                                                                         w.backend.backend(i), w.stats);
    a.service->set_tracer(w.tracing.tracer(i));
    a.tables = std::make_unique<ratelimit::service::table_lookup>(
        w.rl.tables.redis_ttl, w.backend.table_reader(i), &w.redis_tables, i == 0);
    // A Redis row read here is learnt by the other workers: read once for all, and the same everywhere.
    a.tables->set_share([&apis, i](std::uint32_t table, std::string_view value,
                                   const ratelimit::service::redis_table_cache::cached& row) {
      apis.post_each([table, value = std::string(value), row, i](worker_apis& other, unsigned j) {
        if (j != i) other.tables->learn(table, value, row);
      });
    });
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
                                                               io.get_executor());
    a.quota->set_tracer(w.tracing.tracer(i));
    a.quota->add_to(*methods);
    a.grpc_health = std::make_unique<net::grpc::health_service>(
        "ratelimit", [&health = w.health] { return health.healthy(); },
        [&check_requests] { check_requests.inc(); });
    a.grpc_health->add_to(*methods);
    if (w.reflection) net::grpc::reflection_service::add_to(*methods);
    w.grpc.add_worker(io, std::move(methods));
  });
  w.health.on_change([&apis](bool) { apis.post_each([](worker_apis& a) { a.grpc_health->notify(); }); });
}

asio::ip::tcp::endpoint listen_http(core::per_worker<worker_apis>& apis, const process_settings& proc) {
  asio::ip::tcp::endpoint endpoint;
  auto options = proc.http;
  options.reuse_port = apis.size() > 1;
  options.check_port_free = true;  // the first socket: another process's listener is refused, not joined
  for (auto& a : apis) {
    a.http = std::make_unique<net::http::server>(*a.io, options, a.routes);
    try {
      endpoint = a.http->listen();
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(core::cat("Failed to open HTTP listener: ", e.what()));  // upstream's words
    }
    options.port = endpoint.port();  // port 0: the other workers bind the port the first got
    options.check_port_free = false;
  }
  return endpoint;
}

ratelimit::service::rules_source::publish_fn publish_to(core::per_worker<worker_apis>& apis) {
  return [&apis](std::shared_ptr<const ratelimit::config::rule_set> snapshot) {
    apis.post_each([snapshot](worker_apis& a) {
      a.service->set_rules(snapshot);
      a.quota->set_rules(snapshot);
    });
  };
}

ratelimit::service::limit_tables_source::publish_fn publish_tables_to(core::per_worker<worker_apis>& apis) {
  return [&apis](std::shared_ptr<const ratelimit::service::table_set> tables) {
    apis.post_each([tables](worker_apis& a) { a.tables->set_tables(tables); });
  };
}

void start_quota(core::per_worker<worker_apis>& apis) {
  apis.post_each([](worker_apis& a) { a.quota->start(); });
}

void stop_quota(core::per_worker<worker_apis>& apis) {
  apis.post_each([](worker_apis& a) { a.quota->stop(); });
}

std::size_t open_http(const core::per_worker<worker_apis>& apis) {
  std::size_t n = 0;
  for (const auto& w : apis) n += w.http->open_connections();
  return n;
}

}  // namespace sluice
