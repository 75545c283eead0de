#pragma once
// Feeds the services their rules from the rule directory: the first load at start-up, then a hot reload after
// each burst of file changes (core::file_watch); or, with CONFIG_TYPE=GRPC_XDS_SOTW, from each xDS response
// (apply). Each new snapshot is handed to `publish`, which gives it to
// every worker's service (by a post to the worker). A reload is all-or-nothing: a bad file keeps the last
// good rules and is logged with its name. Counts ratelimit.service.config_load_success / config_load_error
// and drives the optional "config loaded" health component.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_watch.hpp"
#include "core/health.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::service {

struct rules_source_settings {
  config::directory_layout layout;
  bool merge_domain_config = false;                      // MERGE_DOMAIN_CONFIG
  bool healthy_with_at_least_one_config_loaded = false;  // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED
  std::chrono::milliseconds debounce{100};
};

// One load of the rules, as the dashboard lists them.
struct reload_record {
  std::chrono::system_clock::time_point time;
  bool ok = false;
  std::string source;  // "files", or what the xDS resources were called
  std::size_t domains = 0;
  std::string error;  // when not ok
};

class rules_source {
 public:
  static constexpr std::size_t reloads_kept = 10;

  using publish_fn = std::function<void(std::shared_ptr<const config::rule_set>)>;

  rules_source(rules_source_settings settings, publish_fn publish, stats::store& stats, core::health& health);

  // Reads and compiles every rule file; on success the service gets the new snapshot. Returns the error, if
  // any.
  std::optional<std::string> load();
  // The same for rules from elsewhere (xDS resources as files; `what` names them in the log).
  std::optional<std::string> apply(std::span<const config::config_file> files, std::string_view what);
  // A set of rules that could not even be read: counted and logged as a failed load; the rules stay.
  void refuse(const std::string& error, std::string_view what);
  // The snapshot published last (null before the first good load): for the debug page. Thread-safe.
  std::shared_ptr<const config::rule_set> current() const { return current_.load(); }
  // The last loads, newest first (at most reloads_kept). Thread-safe.
  std::vector<reload_record> recent_reloads() const;
  // Starts watching for changes on the executor (call once).
  void watch(boost::asio::any_io_executor ex);
  void stop();

 private:
  rules_source_settings settings_;
  publish_fn publish_;
  std::atomic<std::shared_ptr<const config::rule_set>> current_;
  stats::store& stats_;
  core::health& health_;
  std::optional<std::size_t> health_component_;
  stats::counter& load_success_;
  stats::counter& load_error_;
  std::unique_ptr<core::file_watch> watch_;
  mutable std::mutex reloads_mutex_;
  std::deque<reload_record> reloads_;
  void remember(reload_record r);
};

}  // namespace sluice::ratelimit::service
