#include "rules_setup.hpp"

#include "core/log.hpp"

namespace sluice {

namespace asio = boost::asio;

namespace {

// The first load of the rule files; false when Sluice must not start without them.
bool load_initial_files(ratelimit::service::rules_source& rules, const ratelimit::module_settings& rl) {
  auto error = rules.load();
  if (!error || rl.force_start_without_initial_config) return true;
  core::log_error(
      "cannot start without rate limit rules (set FORCE_START_WITHOUT_INITIAL_CONFIG=true to start anyway): ",
      *error);
  return false;
}

// Without FORCE_START_WITHOUT_INITIAL_CONFIG, start-up waits for the first xDS response whose rules load (the
// control loop runs meanwhile: it applies them). false when SIGTERM or SIGINT came first.
bool wait_for_xds_rules(asio::io_context& control, const ratelimit::service::rules_source& rules,
                        const ratelimit::module_settings& rl, core::stop_signals& stop_signals) {
  if (rl.force_start_without_initial_config) return true;
  bool interrupted = false;
  stop_signals.watch(control.get_executor(), [&](int) { interrupted = true; });
  while (!interrupted && !rules.loaded(ratelimit::service::rule_origin::xds)) control.run_one();
  stop_signals.unwatch();
  control.poll();  // a signal's call posted meanwhile, which refers to this frame
  if (interrupted) core::log_warn("Stopped while waiting for the first rules from the xDS Management Server");
  return !interrupted;
}

}  // namespace

std::unique_ptr<ratelimit::xds::client> start_xds(const ratelimit::module_settings& rl,
                                                  asio::io_context& control,
                                                  ratelimit::service::rules_source& rules) {
  if (!rl.xds) return nullptr;
  core::log_info("Rules come from the xDS Management Server at ", rl.xds->server_url);
  auto client = std::make_unique<ratelimit::xds::client>(
      *rl.xds, control.get_executor(),
      ratelimit::xds::rules_target{
          [&rules](std::vector<ratelimit::config::config_file> files) {
            return rules.apply_xds(std::move(files));
          },
          [&rules](const std::string& error) { rules.refuse(error, ratelimit::service::rule_origin::xds); }});
  rules.set_xds_retry([xds = client.get()] { xds->ask_again(); });
  client->start();
  return client;
}

std::optional<int> load_first_rules(ratelimit::service::rules_source& rules,
                                    const ratelimit::module_settings& rl, ratelimit::xds::client* xds,
                                    asio::io_context& control, core::stop_signals& stop_signals) {
  using ratelimit::service::rule_origin;
  core::log_info("Waiting for initial ratelimit config update event");
  if (rl.rules.from_files) {
    if (!load_initial_files(rules, rl)) return 1;
    rules.watch(control.get_executor());  // before the wait for xDS: a file changed meanwhile is loaded
  }
  if (xds && !wait_for_xds_rules(control, rules, rl, stop_signals)) return 0;
  if ((!rl.rules.from_files || rules.loaded(rule_origin::files)) && (!xds || rules.loaded(rule_origin::xds)))
    core::log_info("Successfully loaded the initial ratelimit configs");
  return std::nullopt;
}

bool load_limit_tables(ratelimit::service::limit_tables_source& tables,
                       ratelimit::service::rules_source& rules, const ratelimit::module_settings& rl) {
  rules.set_table_names(&tables);
  if (rl.tables.directory.empty()) return true;
  const auto report = tables.load();
  if (!report.folder_read)
    core::log_error("cannot start: LIMIT_TABLES_DIR must be a folder Sluice can read: ",
                    report.errors.front());
  return report.folder_read;
}

void watch_limit_tables(ratelimit::service::limit_tables_source& tables,
                        ratelimit::service::rules_source& rules, const ratelimit::module_settings& rl,
                        asio::io_context& control) {
  tables.watch(control.get_executor(), [&rules, files = rl.rules.from_files] {
    if (files) rules.load();
  });
}

}  // namespace sluice
