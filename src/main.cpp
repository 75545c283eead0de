// Sluice's composition root (with backend_setup.cpp, which starts the counter store BACKEND_TYPE picks): the
// only place that sees every module. It reads the settings once, wires the services to the HTTP and gRPC
// listeners, the stats sinks and the debug server, and runs the io_context until a signal asks for a graceful
// stop.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "backend_setup.hpp"
#include "core/env.hpp"
#include "core/health.hpp"
#include "core/log.hpp"
#include "echo/echo_api.hpp"
#include "echo/settings.hpp"
#include "holidays/holidays_api.hpp"
#include "holidays/settings.hpp"
#include "net/grpc/grpc_server.hpp"
#include "net/http/debug_pages.hpp"
#include "net/http/server.hpp"
#include "ratelimit/api/debug_handlers.hpp"
#include "ratelimit/api/grpc_service.hpp"
#include "ratelimit/api/http_handlers.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/settings.hpp"
#include "stats/prometheus_setup.hpp"
#include "stats/sink_factory.hpp"
#include "stats/sink_settings.hpp"
#include "stats/store.hpp"
#include "stats/text_dump.hpp"

namespace asio = boost::asio;
using namespace sluice;

namespace {

constexpr std::string_view usage = R"(Usage:
  sluice                        start the server (configured by environment variables; see README.md)
  sluice check-config DIR [--merge-domain-config]
                                validate the rate limit rule files in DIR and exit
  sluice --help | --version
)";

struct process_settings {
  core::log_level log_level = core::log_level::warn;
  bool log_json = false;
  unsigned io_threads = 1;
  net::http::server_options http;
  net::http::server_options debug;
  net::grpc::server_options grpc;
  std::chrono::milliseconds shutdown_grace{10'000};
};

std::chrono::milliseconds to_ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

process_settings read_process_settings(const core::env_reader& env) {
  process_settings s;
  auto level_text = env.get_string("LOG_LEVEL", "warn");
  auto level = core::parse_log_level(level_text);
  if (!level) {
    throw core::settings_error(
        core::cat("invalid value '", level_text,
                  "' for LOG_LEVEL: expected panic, fatal, error, warn, info, debug or trace"));
  }
  s.log_level = *level;
  s.log_json = env.get_choice("LOG_FORMAT", "text", {"text", "json"}, true) == "json";
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  s.io_threads = static_cast<unsigned>(env.get_uint("IO_THREADS", cores, 1, 1024));

  s.http.host = env.get_string("HOST", "0.0.0.0");
  s.http.port = static_cast<std::uint16_t>(env.get_uint("PORT", 8080, 0, 65535));
  s.http.max_header_bytes = env.get_uint("HTTP_MAX_HEADER_BYTES", s.http.max_header_bytes, 1024, 1 << 20);
  s.http.max_body_bytes = env.get_uint("HTTP_MAX_BODY_BYTES", s.http.max_body_bytes, 1024, 64 << 20);
  s.http.idle_timeout = to_ms(env.get_duration("HTTP_IDLE_TIMEOUT", s.http.idle_timeout));
  s.http.read_timeout = to_ms(env.get_duration("HTTP_READ_TIMEOUT", s.http.read_timeout));
  s.http.tls_cert_file = env.get_string("HTTP_SERVER_TLS_CERT", "");
  s.http.tls_key_file = env.get_string("HTTP_SERVER_TLS_KEY", "");
  if (s.http.tls_cert_file.empty() != s.http.tls_key_file.empty())
    throw core::settings_error("HTTP_SERVER_TLS_CERT and HTTP_SERVER_TLS_KEY must be set together");

  s.grpc.host = env.get_string("GRPC_HOST", "0.0.0.0");
  s.grpc.port = static_cast<std::uint16_t>(env.get_uint("GRPC_PORT", 8081, 0, 65535));
  s.grpc.unix_socket = env.get_string("GRPC_UDS", "");
  s.grpc.max_connection_age = to_ms(env.get_duration("GRPC_MAX_CONNECTION_AGE", s.grpc.max_connection_age));
  s.grpc.max_connection_age_grace =
      to_ms(env.get_duration("GRPC_MAX_CONNECTION_AGE_GRACE", s.grpc.max_connection_age_grace));
  s.shutdown_grace = to_ms(env.get_duration("SHUTDOWN_GRACE_PERIOD", s.shutdown_grace));

  s.debug.host = env.get_string("DEBUG_HOST", "0.0.0.0");
  s.debug.port = static_cast<std::uint16_t>(env.get_uint("DEBUG_PORT", 6070, 0, 65535));
  return s;
}

int check_config(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << usage;
    return 2;
  }
  std::string dir = argv[2];
  bool merge = core::env_reader().get_bool("MERGE_DOMAIN_CONFIG", false);
  for (int i = 3; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--merge-domain-config") {
      merge = true;
    } else {
      std::cerr << "unknown option " << argv[i] << "\n" << usage;
      return 2;
    }
  }
  std::cout << "checking rate limit configs...\nloading config directory: " << dir << "\n";
  auto files = ratelimit::config::read_rule_files(dir, "", false);
  std::string error = files.error;
  if (error.empty()) {
    stats::store scratch;
    error = ratelimit::config::load_rules(files.files, merge, scratch).error;
  }
  if (!error.empty()) {
    std::cout << "error loading rate limit configs: " << error << "\n";
    return 1;
  }
  std::cout << "all rate limit configs ok\n";
  return 0;
}

int run_server() {
  core::env_reader env;
  auto proc = read_process_settings(env);
  // First, so it is destroyed last: the file watches of the API keys and the holiday list live on it.
  asio::io_context ioc(static_cast<int>(proc.io_threads));
  auto rl = ratelimit::read_module_settings(env);
  // The echo API: its OpenAPI document and API key file are loaded and checked here, before anything starts.
  auto echo_settings = echo::read_settings(env);
  auto holidays_settings = holidays::read_settings(env);
  // One key store (API_KEYS_FILE) serves both APIs.
  auto api_keys = echo_settings || holidays_settings
                      ? auth::open_api_keys(echo_settings ? echo_settings->api_keys_file
                                                          : holidays_settings->api_keys_file)
                      : nullptr;
  auto stats_settings = stats::read_sink_settings(env);
  core::log_init(proc.log_level, proc.log_json);

  stats::store stats(stats_settings.max_dynamic_series);
  // Checked before anything starts: a bad mapping file or PROMETHEUS_ADDR exits 1 at once.
  auto prometheus = stats::make_prometheus_exporter(stats_settings, stats);
  core::system_clock clock;
  std::optional<holidays::holiday_list> holiday_list;
  if (holidays_settings) {
    try {
      holiday_list.emplace(holidays_settings->csv_file, clock);
    } catch (const std::runtime_error& e) {
      throw core::settings_error(core::cat("HOLIDAYS_CSV: ", e.what()));
    }
  }
  core::health health;
  auto sigterm_component = health.add_component("sigterm", true);
  auto work = asio::make_work_guard(ioc);
  int exit_code = 0;
  std::function<void()> shutdown;

  backend_holder backend;
  start_backend(backend, rl, ioc, clock, health, stats, [&] {
    exit_code = 1;
    shutdown();
  });
  ratelimit::limiter::limiter limiter(rl.limiter, clock);
  ratelimit::service::rate_limit_service service(rl.service, limiter, backend.get(), stats);
  ratelimit::service::rules_source rules(rl.rules, service, stats, health);
  core::log_info("Waiting for initial ratelimit config update event");
  if (auto error = rules.load(); error && !rl.force_start_without_initial_config) {
    core::log_error(
        "cannot start without rate limit rules (set FORCE_START_WITHOUT_INITIAL_CONFIG=true to start "
        "anyway): ",
        *error);
    backend.stop();
    return 1;
  } else if (!error) {
    core::log_info("Successfully loaded the initial ratelimit configs");
  }

  auto routes = std::make_shared<net::http::router>();
  ratelimit::api::add_http_routes(*routes, service, health);
  // The echo API shares the HTTP listener; undefined paths then get ESPv2's 404.
  std::optional<auth::jwt_verifier> jwt_verifier;
  std::optional<echo::echo_api> echo_api;
  if (echo_settings) {
    jwt_verifier.emplace(ioc.get_executor(), echo::jwt_options_for(*echo_settings));
    echo_api.emplace(echo_settings->document, api_keys.get(), *jwt_verifier, echo_settings->max_body_bytes);
    echo_api->add_routes(*routes);
    routes->set_fallback([](const net::http::request& req) -> asio::awaitable<net::http::response> {
      co_return echo::not_defined(req);
    });
    core::log_warn("Echo API: ", echo_settings->document.operations.size(), " operations from ",
                   echo_settings->openapi_file, "; ", api_keys ? api_keys->size() : 0, " API keys from ",
                   echo_settings->api_keys_file);
  }
  std::optional<holidays::holidays_api> holidays_api;
  if (holiday_list) {
    holidays_api.emplace(*holiday_list, api_keys.get(), holidays_settings->require_key, clock);
    holidays_api->add_routes(*routes);
    holiday_list->watch(ioc.get_executor());
    core::log_warn("Holidays API: ", holiday_list->current()->holidays.size(), " holidays from ",
                   holiday_list->source(), holidays_settings->require_key ? "; API keys required" : "");
  }
  if (api_keys) api_keys->watch(ioc.get_executor());
  net::http::server http(ioc, proc.http, routes);
  auto http_endpoint = http.listen();

  // Prometheus: its own listener on PROMETHEUS_ADDR; every scrape renders the store.
  std::optional<net::http::server> prometheus_http;
  asio::ip::tcp::endpoint prometheus_endpoint;
  if (prometheus) {
    stats.set_timer_observer(prometheus.get());
    auto prometheus_routes = std::make_shared<net::http::router>();
    prometheus_routes->add(
        stats_settings.prometheus_path,
        [&exporter = *prometheus](const net::http::request& req) -> asio::awaitable<net::http::response> {
          co_return net::http::make_response(req, boost::beast::http::status::ok,
                                             stats::prometheus_exporter::content_type, exporter.render());
        });
    auto address = stats::parse_prometheus_addr(stats_settings.prometheus_addr);
    auto options = proc.http;
    options.host = address.host;
    options.port = address.port;
    options.tls_cert_file.clear();  // HTTPS is for the API listener only, as upstream serves metrics
    options.tls_key_file.clear();
    prometheus_http.emplace(ioc, options, prometheus_routes);
    try {
      prometheus_endpoint = prometheus_http->listen();
    } catch (const std::system_error& e) {
      throw core::settings_error(core::cat("PROMETHEUS_ADDR: ", e.what()));  // exit 1, saying which listener
    }
  }

  net::grpc::server grpc(proc.grpc);
  ratelimit::api::rls_grpc_service rls(service, grpc.calls(), stats);
  grpc.add_service(&rls);
  grpc.start();
  health.on_change([&grpc](bool healthy) { grpc.set_serving(healthy); });

  // statsd, DogStatsD or stdout, flushed on the sink's own thread; declared after everything that records
  // stats, so it stops before them.
  auto line_sink = stats::start_line_sink(stats_settings, stats);
  if (prometheus_http) {
    prometheus_http->start();
    core::log_warn("Listening for Prometheus on '",
                   core::host_port(prometheus_endpoint.address().to_string(), prometheus_endpoint.port()),
                   "'");
  }

  // Debug server: upstream only logs when its listener fails, and so does Sluice.
  auto debug_routes = std::make_shared<net::http::router>();
  auto debug_pages = net::http::pprof_pages();
  debug_pages.push_back(ratelimit::api::rlconfig_page(service));
  debug_pages.push_back({"/stats", "print out stats",
                         [&stats](const net::http::request& req) -> asio::awaitable<net::http::response> {
                           co_return net::http::make_response(req, boost::beast::http::status::ok,
                                                              "text/plain; charset=utf-8",
                                                              stats::text_dump(stats));
                         }});
  net::http::add_debug_pages(*debug_routes, std::move(debug_pages));
  net::http::server debug(ioc, proc.debug, debug_routes);
  try {
    auto debug_endpoint = debug.listen();
    debug.start();
    core::log_warn("Listening for debug on '",
                   core::host_port(debug_endpoint.address().to_string(), debug_endpoint.port()), "'");
  } catch (const std::exception& e) {
    core::log_error("Failed to open debug listener on '", core::host_port(proc.debug.host, proc.debug.port),
                    "': ", e.what());
  }

  http.start();
  rules.watch(ioc.get_executor());

  std::thread stopper;
  std::once_flag stopping;
  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  shutdown = [&] {
    std::call_once(stopping, [&] {
      asio::post(ioc, [&] { signals.cancel(); });
      health.set(sigterm_component, false);
      http.stop();
      debug.stop();
      if (prometheus_http) prometheus_http->stop();
      rules.stop();
      if (api_keys) api_keys->stop();
      if (holiday_list) holiday_list->stop();
      // gRPC's Shutdown blocks until in-flight calls finish, and those may finish on this io_context; the
      // backend stops after them.
      stopper = std::thread([&] {
        grpc.shutdown(proc.shutdown_grace);
        asio::post(ioc, [&] {
          backend.stop();
          work.reset();
        });
      });
    });
  };
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    core::log_warn("Received signal ", signo == SIGTERM ? "terminated" : "interrupt",
                   ", initiating shutdown");
    shutdown();
  });

  core::log_warn("Listening for HTTP on '", http_endpoint.address().to_string(), ":", http_endpoint.port(),
                 "'");
  core::log_warn("Listening for gRPC on '", grpc.address(), "'");

  std::vector<std::thread> threads;
  for (unsigned i = 1; i < proc.io_threads; ++i) threads.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto& t : threads) t.join();
  if (stopper.joinable()) stopper.join();
  core::log_warn("Shutdown complete");
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view command = argc > 1 ? argv[1] : "";
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << "Sluice " << SLUICE_VERSION << ": an Envoy rate limit service.\n\n" << usage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "sluice " << SLUICE_VERSION << "\n";
    return 0;
  }
  if (command == "check-config") return check_config(argc, argv);
  if (!command.empty()) {
    std::cerr << "unknown command '" << command << "'\n" << usage;
    return 2;
  }
  try {
    return run_server();
  } catch (const core::settings_error& e) {
    std::cerr << "sluice: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "sluice: " << e.what() << "\n";
    return 1;
  }
}
