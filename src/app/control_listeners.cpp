#include "control_listeners.hpp"

#include <boost/asio/use_awaitable.hpp>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "net/http/debug_pages.hpp"
#include "ratelimit/api/counters_api.hpp"
#include "ratelimit/api/debug_handlers.hpp"
#include "ratelimit/api/explain_api.hpp"
#include "stats/prometheus_setup.hpp"
#include "stats/sink_factory.hpp"
#include "stats/text_dump.hpp"

namespace sluice {

namespace asio = boost::asio;

namespace {

// The Prometheus listener on PROMETHEUS_ADDR (control thread); every scrape renders the store.
std::unique_ptr<net::http::server> start_prometheus(const stats::sink_settings& settings,
                                                    stats::prometheus_exporter& exporter,
                                                    const net::http::server_options& http,
                                                    asio::io_context& control) {
  auto routes = std::make_shared<net::http::router>();
  routes->add(settings.prometheus_path,
              [&exporter](const net::http::request& req) -> asio::awaitable<net::http::response> {
                co_return net::http::make_response(req, boost::beast::http::status::ok,
                                                   stats::prometheus_exporter::content_type,
                                                   exporter.render());
              });
  auto address = stats::parse_prometheus_addr(settings.prometheus_addr);
  auto options = http;
  options.host = address.host;
  options.port = address.port;
  options.tls_cert_file.clear();  // HTTPS is for the API listener only, as upstream serves metrics
  options.tls_key_file.clear();
  options.reuse_port = false;
  auto server = std::make_unique<net::http::server>(control, options, routes);
  asio::ip::tcp::endpoint endpoint;
  try {
    endpoint = server->listen();
  } catch (const std::runtime_error& e) {
    throw core::settings_error(core::cat("PROMETHEUS_ADDR: ", e.what()));  // exit 1, saying which listener
  }
  server->start();
  core::log_info("Listening for Prometheus on '",
                 core::host_port(endpoint.address().to_string(), endpoint.port()), "'");
  return server;
}

// The debug server (control thread). A listener that cannot open stops start-up (upstream only logs it, and
// runs on without its debug pages: on a port another process holds, that one's pages were shown instead).
// The counters API and explain reach each worker's service on its thread.
ratelimit::api::worker_services services_of(const debug_sources& sources) {
  return sources.apis.view<ratelimit::service::rate_limit_service>(
      [](worker_apis& a) -> ratelimit::service::rate_limit_service& { return *a.service; });
}

std::unique_ptr<net::http::server> start_debug(
    const process_settings& proc, const ratelimit::service::rules_source& rules, stats::store& stats,
    ratelimit::api::operator_pages& operator_view, const debug_sources& sources,
    const ratelimit::api::admin_tokens* tokens, asio::io_context& control) {
  const auto& options = proc.debug;
  auto routes = std::make_shared<net::http::router>();
  auto pages = net::http::pprof_pages();
  pages.push_back(ratelimit::api::rlconfig_page(rules));
  pages.push_back(ratelimit::api::counters_page(services_of(sources), tokens, stats));
  pages.push_back(ratelimit::api::explain_page(services_of(sources)));
  for (auto& page : operator_view.pages()) pages.push_back(std::move(page));
  pages.push_back({"/stats", "print out stats",
                   [&stats](const net::http::request& req) -> asio::awaitable<net::http::response> {
                     co_return net::http::make_response(req, boost::beast::http::status::ok,
                                                        "text/plain; charset=utf-8", stats::text_dump(stats));
                   }});
  net::http::add_debug_pages(*routes, std::move(pages), net::http::host_check(proc.debug_allowed_hosts));
  auto server = std::make_unique<net::http::server>(control, options, routes);
  asio::ip::tcp::endpoint endpoint;
  try {
    endpoint = server->listen();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(core::cat("Failed to open debug listener: ", e.what()));
  }
  server->start();
  core::log_info("Listening for debug on '", core::host_port(endpoint.address().to_string(), endpoint.port()),
                 "'");
  return server;
}

}  // namespace

void start_control_listeners(control_listeners& l, const process_settings& proc,
                             const stats::sink_settings& stats_settings,
                             stats::prometheus_exporter* prometheus,
                             const ratelimit::service::rules_source& rules, stats::store& stats,
                             debug_sources sources, asio::io_context& control) {
  if (prometheus) {
    stats.set_timer_observer(prometheus);
    l.prometheus = start_prometheus(stats_settings, *prometheus, proc.http, control);
  }
  l.line_sink = stats::start_line_sink(stats_settings, stats);
  if (!proc.admin_token_file.empty()) {
    try {
      l.admin_tokens = std::make_unique<ratelimit::api::admin_tokens>(proc.admin_token_file);
    } catch (const std::runtime_error& e) {
      throw core::settings_error(core::cat("ADMIN_TOKEN_FILE: ", e.what()));
    }
    l.admin_tokens->watch(control.get_executor());
  }
  std::optional<core::worker_view<stats::top_recorder>> tops;
  if (!sources.apis.empty() && sources.apis[0].top)
    tops =
        sources.apis.view<stats::top_recorder>([](worker_apis& a) -> stats::top_recorder& { return *a.top; });
  l.operator_view = std::make_unique<ratelimit::api::operator_pages>(
      ratelimit::api::operator_sources{std::move(tops), sources.rules, sources.health, sources.stats,
                                       sources.clock, sources.backend_type},
      control);
  l.debug = start_debug(proc, rules, stats, *l.operator_view, sources, l.admin_tokens.get(), control);
}

}  // namespace sluice
