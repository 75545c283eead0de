// Sluice's composition root (with backend_choice.cpp, which starts the backend module BACKEND_TYPE picks,
// process_settings.cpp, shared_apis.cpp and control_listeners.cpp): the only place that sees every module. It
// reads the settings once, wires the services to the HTTP and gRPC listeners, the stats sinks and the debug
// server, and runs the io_context until a signal asks for a graceful stop.

#include <google/protobuf/stubs/logging.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <exception>
#include <iostream>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "backend_choice.hpp"
#include "check_config.hpp"
#include "control_listeners.hpp"
#include "core/connection_limit.hpp"
#include "core/env.hpp"
#include "core/health.hpp"
#include "core/log.hpp"
#include "core/open_files.hpp"
#include "core/stop_signals.hpp"
#include "core/strings.hpp"
#include "core/version.hpp"
#include "core/workers.hpp"
#include "net/grpc/health_service.hpp"
#include "net/grpc/server.hpp"
#include "net/http/server.hpp"
#include "process_settings.hpp"
#include "ratelimit/api/grpc_service.hpp"
#include "ratelimit/api/http_handlers.hpp"
#include "ratelimit/client/client_cmd.hpp"
#include "ratelimit/client/counters_cmd.hpp"
#include "ratelimit/client/explain_cmd.hpp"
#include "ratelimit/client/rlqs_client_cmd.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/settings.hpp"
#include "ratelimit/xds/client.hpp"
#include "rules_setup.hpp"
#include "settings_registry.hpp"
#include "shared_apis.hpp"
#include "shutdown_plan.hpp"
#include "stats/prometheus_setup.hpp"
#include "stats/sink_settings.hpp"
#include "stats/store.hpp"
#include "tracing_setup.hpp"
#include "version.hpp"
#include "worker_apis.hpp"

namespace asio = boost::asio;
using namespace sluice;

namespace {

// After check-config's synopsis (check_config.hpp).
constexpr std::string_view usage_head = R"(Usage:
  sluice                        start the server (configured by environment variables; see
                                docs/reference/settings.md)
  )";
constexpr std::string_view usage = R"(
                                validate the rate limit rule files in DIR and exit (--strict: fail on
                                warnings too; sluice check-config -help lists the flags)
  sluice client [flags]         send one ShouldRateLimit request and print the answer
                                (sluice client -help lists the flags)
  sluice counters get|reset|set [flags]
                                look at, reset or set a descriptor's counters (the debug listener's
                                counters API; sluice counters -help lists the flags)
  sluice explain [flags]        why a request would be limited (the debug listener's /explain; takes
                                sluice client's flags and -debug_addr; nothing is counted)
  sluice rlqs-client [flags]    a small quota data plane: report buckets, print the actions received
                                (sluice rlqs-client -help lists the flags)
  sluice settings [--format text|markdown]
                                every environment setting, its default and meaning (markdown: the
                                reference page, docs/reference/settings.md)
  sluice --help | --version
)";

// protobuf logs every request it cannot parse (invalid UTF-8 in a string field) at ERROR: a client could fill
// the log. The caller already answers such requests with an error, so these lines are debug detail.
void protobuf_log(google::protobuf::LogLevel, const char*, int, const std::string& message) {
  core::log_debug("protobuf: ", message);
}

// A listener that fails to accept (out of file descriptors) makes the process unhealthy until it accepts
// again.
std::function<void(bool)> report_accepting(core::health& health, std::string listener) {
  auto component = health.add_component(std::move(listener), true);
  return [&health, component](bool accepting) {
    if (accepting) {
      health.part_recovered(component);
    } else {
      health.part_failed(component);
    }
  };
}

// The workers end by themselves once their backends have stopped; whatever is left after a second is
// abandoned.
void wait_for_workers(core::worker_pool& workers) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (workers.running() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  workers.stop();
}

void log_start(std::size_t workers, const core::open_file_limit& open_files, const process_settings& proc) {
  core::log_info("Starting ", workers, " workers (IO_THREADS)");
  if (open_files.now != open_files.before)
    core::log_info("Open file limit raised from ", open_files.before, " to ", open_files.now);
  core::log_info("At most ", proc.max_connections, " client connections (MAX_CONNECTIONS)");
}

// MAX_CONNECTIONS, shared by the HTTP and gRPC listeners; a listener that cannot accept makes us unhealthy.
void limit_connections(process_settings& proc, core::health& health) {
  auto connections = std::make_shared<core::connection_limit>(proc.max_connections);
  proc.http.connections = proc.grpc.connections = connections;
  proc.http.on_accepting = report_accepting(health, "HTTP listener");
  proc.grpc.on_accepting = report_accepting(health, "gRPC listener");
}

// Once the workers run: the shared files' watch starts (before any client is answered: a client that saw the
// server ready may change a file at once), then the listeners accept, the quota services plan and the
// exporters start (the rule files are watched from their first load on).
void start_serving(core::per_worker<worker_apis>& apis, ratelimit::rlqs::demand_exchange& demand,
                   net::grpc::server& grpc, tracing_holder& tracing, shared_apis& shared,
                   asio::io_context& control) {
  shared.watch(control.get_executor());
  for (auto& w : apis) w.http->start();
  start_quota(apis);
  demand.start();
  grpc.start(control.get_executor());
  tracing.start(control);
}

// What the start-up made before the services: the settings, the control loop, the workers, stats and health.
struct process_parts {
  core::stop_signals& stop_signals;
  process_settings& proc;
  asio::io_context& control;
  tracing_holder& tracing;
  core::worker_pool& workers;
  const ratelimit::module_settings& rl;
  const backend_settings& backend;
  const tracing::settings& trace_settings;
  const stats::sink_settings& stats_settings;
  const core::clock& clock;
  shared_apis& shared;
  stats::store& stats;
  stats::prometheus_exporter* prometheus;
  core::health& health;
  std::size_t sigterm_component;  // made unhealthy by a stop
};

// The services and their objects live here, so they are destroyed before the process parts they use.
struct services {
  explicit services(core::worker_pool& workers) : apis(workers) {}
  std::unique_ptr<ratelimit::backends::module> backend;
  std::unique_ptr<ratelimit::limiter::limiter> limiter;  // shared by the workers (limiter.hpp says how)
  ratelimit::service::redis_tables_health redis_tables;
  core::per_worker<worker_apis> apis;
  std::unique_ptr<ratelimit::service::limit_tables_source> tables;
  std::unique_ptr<net::grpc::server> grpc;
  std::unique_ptr<ratelimit::rlqs::demand_exchange> demand;
  std::unique_ptr<ratelimit::service::rules_source> rules;
  std::unique_ptr<ratelimit::xds::client> xds;
};

// The control thread runs until a stop (a signal, or a backend that cannot start) has been carried out.
int run_until_stopped(process_parts& p, services& s, control_listeners& listeners, int& exit_code,
                      std::function<void()>& shutdown) {
  auto work = asio::make_work_guard(p.control);
  shutdown_plan plan{p.control,
                     p.workers,
                     p.health,
                     p.sigterm_component,
                     s.apis,
                     *s.grpc,
                     *s.rules,
                     *s.tables,
                     s.xds.get(),
                     p.shared,
                     listeners,
                     *s.backend,
                     *s.demand,
                     p.tracing,
                     [&] {
                       p.stop_signals.unwatch();
                       work.reset();
                     },
                     p.proc.shutdown_grace};
  shutdown = [&plan] { plan.begin(); };
  p.stop_signals.watch(p.control.get_executor(), [&](int signo) {
    core::log_warn("Received signal ", signo == SIGTERM ? "terminated" : "interrupt",
                   ", initiating shutdown");
    shutdown();
  });
  p.control.run();
  p.stop_signals.unwatch();  // (already, unless the loop ended otherwise): nothing is posted to it now
  wait_for_workers(p.workers);
  core::log_warn("Shutdown complete");
  return exit_code;
}

// The services: backends, workers, rules, listeners; then serving until a stop.
int serve(process_parts& p) {
  int exit_code = 0;
  std::function<void()> shutdown;
  services s(p.workers);
  s.backend = start_backend(p.backend, {p.workers, p.control, p.clock, p.health, p.stats, [&] {
                                          exit_code = 1;
                                          if (shutdown) shutdown();
                                        }});
  s.limiter = std::make_unique<ratelimit::limiter::limiter>(p.rl.limiter, p.clock);
  p.tracing = make_tracing(p.trace_settings, p.workers.size(), p.control, p.stats);
  s.grpc = std::make_unique<net::grpc::server>(p.proc.grpc);
  s.demand = s.backend->demand_exchange(p.rl.limiter.cache_key_prefix);
  build_workers(s.apis, {p.rl, *s.limiter, *s.backend, p.stats, p.health, p.shared, *s.grpc, p.tracing,
                         *s.demand, s.redis_tables, p.proc.reflection});
  s.rules =
      std::make_unique<ratelimit::service::rules_source>(p.rl.rules, publish_to(s.apis), p.stats, p.health);
  s.rules->set_limit_check(backend_limit_check(p.backend));
  s.tables = std::make_unique<ratelimit::service::limit_tables_source>(p.rl.tables, publish_tables_to(s.apis),
                                                                       p.stats);
  if (!load_limit_tables(*s.tables, *s.rules, p.rl)) {
    s.backend->stop();
    return 1;
  }
  s.xds = start_xds(p.rl, p.control, *s.rules);
  if (auto exit_code = load_first_rules(*s.rules, p.rl, s.xds.get(), p.control, p.stop_signals)) {
    if (s.xds) s.xds->stop();
    s.rules->stop();
    s.backend->stop();
    return *exit_code;
  }
  watch_limit_tables(*s.tables, *s.rules, p.rl, p.control);
  auto http_endpoint = listen_http(s.apis, p.proc);
  p.shared.log_started();
  s.grpc->listen();
  control_listeners listeners;  // after everything that records stats: its sink stops first
  start_control_listeners(listeners, p.proc, p.stats_settings, p.prometheus, *s.rules, p.stats,
                          {s.apis, *s.rules, p.health, p.stats, p.clock, p.rl.backend_type}, p.control);
  // Before the workers serve: a client that is answered may look for these lines.
  core::log_info("Listening for HTTP on '",
                 core::host_port(http_endpoint.address().to_string(), http_endpoint.port()), "'");
  core::log_info("Listening for gRPC on '", s.grpc->address(), "'");
  p.workers.start();
  // Should what follows throw, the workers stop before the objects they use are destroyed.
  struct stop_on_unwind {
    core::worker_pool& workers;
    ~stop_on_unwind() {
      if (std::uncaught_exceptions() > 0) workers.stop();
    }
  } guard{p.workers};
  start_serving(s.apis, *s.demand, *s.grpc, p.tracing, p.shared, p.control);
  return run_until_stopped(p, s, listeners, exit_code, shutdown);
}

int run_server() {
  // First of all: every thread started from here on has SIGTERM and SIGINT blocked.
  core::stop_signals stop_signals;
  core::env_reader env;
  const auto open_files = core::raise_open_file_limit();
  auto proc = read_process_settings(env, open_files.now);
  // First, so they are destroyed last: file watches, listeners and connections live on them.
  asio::io_context control(1);
  // Before the workers, so destroyed after them: a request abandoned at stop still ends its spans into it.
  tracing_holder tracing_parts;
  core::worker_pool workers(proc.io_threads);
  const auto rl = ratelimit::read_module_settings(env);
  const auto backend = read_backend_settings(env, rl);
  const auto trace_settings = tracing::read_settings(env);
  const auto stats_settings = stats::read_sink_settings(env);
  core::system_clock clock;
  // The echo API's OpenAPI document, the API key file and the holiday list are checked before anything
  // starts.
  shared_apis shared(env, clock, control);
  core::log_init(proc.log_level, proc.log_json);
  google::protobuf::SetLogHandler(protobuf_log);
  log_start(workers.size(), open_files, proc);
  for (const auto& w : rl.warnings) core::log_warn(w);
  for (const auto& w : unknown_setting_warnings(env)) core::log_warn(w);
  stats::store stats(stats_settings.max_dynamic_series);
  // Checked before anything starts: a bad mapping file or PROMETHEUS_ADDR exits 1 at once.
  auto prometheus = stats::make_prometheus_exporter(stats_settings, stats);
  core::health health;
  const auto sigterm_component = health.add_component("running", true);  // false once a stop began (SIGTERM)
  limit_connections(proc, health);
  process_parts parts{stop_signals, proc,    control,          tracing_parts,  workers,
                      rl,           backend, trace_settings,   stats_settings, clock,
                      shared,       stats,   prometheus.get(), health,         sigterm_component};
  return serve(parts);
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view command = argc > 1 ? argv[1] : "";
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << "Sluice " << core::version << ": an Envoy rate limit service.\n\n"
              << usage_head << check_config_synopsis << usage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "sluice " << core::version << " (commit " << build_commit << ")\n";
    return 0;
  }
  // Each subcommand parses its arguments with the one flag parser (ratelimit/client/flag_parser.hpp).
  using subcommand = int (*)(std::span<const std::string_view>);
  const std::pair<std::string_view, subcommand> subcommands[] = {
      {"check-config", check_config},
      {"client", ratelimit::client::run_client},
      {"counters", ratelimit::client::run_counters},
      {"explain", ratelimit::client::run_explain},
      {"rlqs-client", ratelimit::client::run_rlqs_client},
      {"settings",
       [](std::span<const std::string_view> args) { return print_settings(args, std::cout, std::cerr); }}};
  for (const auto& [name, run] : subcommands) {
    if (command == name) return run(std::vector<std::string_view>(argv + 2, argv + argc));
  }
  if (!command.empty()) {
    std::cerr << "sluice: unknown command '" << command << "'\n\n"
              << usage_head << check_config_synopsis << usage;
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
