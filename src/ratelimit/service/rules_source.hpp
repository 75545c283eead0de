#pragma once
// Feeds the services their rules from their sources (CONFIG_TYPE): the rule directory (the first load at
// start-up, then a hot reload after each burst of file changes, core::file_watch) and an xDS server (each
// response, apply_xds), or both at once. A change of one source is loaded alone, then joined to the other's
// rules in force, whose domains are shared, not loaded again (a domain both give is merged, with
// MERGE_DOMAIN_CONFIG, by loading both sources' files together: files first, so a merge always reads alike).
// The new snapshot goes to `publish`, which gives it to every worker's service (by a post to the worker). A
// load is all-or-nothing: a bad file, or a domain the other source gives already (without
// MERGE_DOMAIN_CONFIG), keeps the rules in force and is logged with its name. Counts
// ratelimit.service.config_load_success / config_load_error and drives the optional "config loaded" health
// component. Runs on the control thread.

#include <array>
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
#include "core/problem.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/service/removed_rules.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::service {

struct rules_source_settings {
  config::directory_layout layout;
  bool from_files = true;                                // CONFIG_TYPE lists FILE
  bool from_xds = false;                                 // CONFIG_TYPE lists GRPC_XDS_SOTW
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

// A source of rules, named as CONFIG_TYPE names it.
enum class rule_origin { files, xds };
std::string_view origin_name(rule_origin origin);

class rules_source {
 public:
  static constexpr std::size_t reloads_kept = 10;

  using publish_fn = std::function<void(std::shared_ptr<const config::rule_set>)>;

  rules_source(rules_source_settings settings, publish_fn publish, stats::store& stats, core::health& health);

  // Reads the rule files and loads them with the other sources' rules; on success the service gets the new
  // snapshot. Returns the error, if any.
  core::problem load();
  // The same for an xDS response's resources (as files): the error is the NACK's.
  core::problem apply_xds(std::vector<config::config_file> files);
  // A source's rules that could not even be read: counted and logged as a failed load; the rules stay.
  void refuse(const std::string& error, rule_origin from);
  // How to have the xDS server send its rules again (a NACKed response cannot be taken back): called when
  // the rule files give up the domain xDS rules were refused for.
  void set_xds_retry(std::function<void()> ask_again) { xds_retry_ = std::move(ask_again); }
  // What the backend says of a limit and its rule. Refused (regions: GCRA): a load with it is refused with
  // `why`. Otherwise a `why` is logged as a warning and the rule loads (memcached: GCRA, concurrency,
  // count_only_admitted, whose requests it answers UNAVAILABLE). Set before the first load.
  struct limit_verdict {
    std::string why;  // empty: the backend counts it
    bool refused = false;
  };
  using limit_check = std::function<limit_verdict(const config::descriptor_node&, const config::rate_limit&)>;
  void set_limit_check(limit_check check) { limit_check_ = std::move(check); }
  // The limit tables rules may name in `limits_from` (null, the default: none). Outlives this source.
  void set_table_names(config::table_names* tables) { tables_ = tables; }
  const config::table_names* table_names() const { return tables_; }
  // Whether a source has had a load accepted. On the control thread.
  bool loaded(rule_origin from) const { return state(from).rules != nullptr; }
  // How many sources CONFIG_TYPE lists.
  std::size_t source_count() const { return settings_.from_files + settings_.from_xds; }
  // The snapshot published last (null before the first good load): for the debug page. Thread-safe.
  std::shared_ptr<const config::rule_set> current() const { return current_.load(); }
  // The last loads, newest first (at most reloads_kept). Thread-safe.
  std::vector<reload_record> recent_reloads() const;
  // Whether a (sanitized) stats key was a limit's until a reload removed it (the dashboard leaves it out).
  // Thread-safe.
  bool removed(std::string_view stats_key) const { return removed_.removed(stats_key); }
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
  removed_rules removed_;
  // The last read of the rule files was accepted: the files in force are what the folder held then.
  bool folder_as_loaded_ = false;
  std::unique_ptr<core::file_watch> watch_;
  mutable std::mutex reloads_mutex_;
  std::deque<reload_record> reloads_;
  void remember(reload_record r);

  // What a source's load gave, before it comes in.
  struct candidate {
    std::shared_ptr<const config::rule_set> own;     // the source's rules alone, without their stats yet
    std::shared_ptr<const config::rule_set> joined;  // with the other source's rules in force
    bool merged = false;  // `joined` was loaded from both sources' files (MERGE_DOMAIN_CONFIG)
    std::vector<std::string> warnings;
    std::string error;
    bool conflict = false;  // refused for a domain the other source gives
  };
  // A load refused for a domain the other source gives: it comes in once the other gives the domain up.
  struct held_back {
    std::vector<config::config_file> files;
    std::shared_ptr<const config::rule_set> rules;
    std::vector<std::string> warnings;
  };
  struct origin_state {
    std::vector<config::config_file> in_force;  // the files of its last accepted load
    // Those files' rules alone; null until a load of the source is accepted (loaded()).
    std::shared_ptr<const config::rule_set> rules;
    std::optional<held_back> refused;
  };
  std::array<origin_state, 2> origins_;
  std::function<void()> xds_retry_;
  limit_check limit_check_;
  config::table_names* tables_ = nullptr;
  origin_state& state(rule_origin from) { return origins_[static_cast<std::size_t>(from)]; }
  const origin_state& state(rule_origin from) const { return origins_[static_cast<std::size_t>(from)]; }

  core::problem offer(rule_origin from, std::vector<config::config_file> files);
  candidate prepare(rule_origin from, const std::vector<config::config_file>& files);
  // Joins `c.own` to the other source's rules in force (files first, whichever changed).
  void join(rule_origin from, const std::vector<config::config_file>& files, candidate& c);
  core::problem settle(rule_origin from, std::vector<config::config_file> files, candidate c);
  void accept(rule_origin from, std::vector<config::config_file> files, candidate c);
  void retry_the_other(rule_origin loaded);
};

// What `check` says of `rules`' limits, each as "domain '<domain>', rule '<path>': <why>": the first refusal
// (a load's error) and the warnings. sluice check-config asks it too.
struct limit_review {
  core::problem refused;
  std::vector<std::string> warnings;
};
limit_review review_limits(const config::rule_set& rules, const rules_source::limit_check& check);

}  // namespace sluice::ratelimit::service
