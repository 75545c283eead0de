#include "ratelimit/service/rules_source.hpp"

#include <filesystem>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/config/yaml_loader.hpp"

namespace sluice::ratelimit::service {

rules_source::rules_source(rules_source_settings settings, publish_fn publish, stats::store& stats,
                           core::health& health)
    : settings_(std::move(settings)),
      publish_(std::move(publish)),
      stats_(stats),
      health_(health),
      load_success_(stats.get_counter("ratelimit.service.config_load_success")),
      load_error_(stats.get_counter("ratelimit.service.config_load_error")) {
  if (settings_.healthy_with_at_least_one_config_loaded)
    health_component_ = health_.add_component("config", false);
}

std::string_view origin_name(rule_origin origin) {
  return origin == rule_origin::files ? "FILE" : "GRPC_XDS_SOTW";
}

namespace {

// How the log and the dashboard's reloads name a source's sets of rules.
std::string_view what(rule_origin origin) {
  return origin == rule_origin::files ? "files" : "xDS resources";
}

}  // namespace

std::optional<std::string> rules_source::load() {
  const auto& layout = settings_.layout;
  auto files =
      config::read_rule_files(layout.rules_directory(), layout.name_prefix(), layout.ignore_dotfiles);
  if (!files.error.empty()) {
    refuse(files.error, rule_origin::files);
    return files.error;
  }
  return offer(rule_origin::files, std::move(files.files));
}

std::optional<std::string> rules_source::apply_xds(std::vector<config::config_file> files) {
  return offer(rule_origin::xds, std::move(files));
}

std::optional<std::string> rules_source::offer(rule_origin from, std::vector<config::config_file> files) {
  try {
    return load_and_publish(from, std::move(files));
  } catch (const std::exception& e) {  // not a rule's error (those are config_errors): memory, most likely
    const auto error = core::cat("the rules could not be loaded: ", e.what());
    refuse(error, from);
    return error;
  }
}

std::optional<std::string> rules_source::load_and_publish(rule_origin from,
                                                          std::vector<config::config_file> files) {
  // With one source the files carry no source: /rlconfig stays upstream's.
  if (source_count() > 1)
    for (auto& f : files) f.source = origin_name(from);
  state(from).refused_for_a_domain = false;
  auto own = config::load_rules(files, settings_.merge_domain_config, stats_);
  if (!own.error.empty()) {
    refuse(own.error, from);
    return own.error;
  }
  auto loaded = with_the_other(from, own.rules, files, state(from).refused_for_a_domain);
  if (!loaded.error.empty()) {
    refuse(loaded.error, from);
    return loaded.error;
  }
  for (const auto& w : own.warnings) core::log_warn(w);
  for (const auto& d : loaded.rules->domain_names()) core::log_info("loaded domain: ", d);
  const std::size_t count = files.size();
  state(from) = {std::move(files), std::move(own.rules), true, false};
  std::size_t domains = loaded.rules->domain_count();
  // Published before /rlconfig shows them: whoever sees the new rules there finds them on every worker.
  publish_(loaded.rules);
  current_.store(std::move(loaded.rules));
  load_success_.inc();
  core::log_info("Successfully loaded new configuration (", count, " ", what(from), ", ", domains,
                 " domains)");
  if (health_component_) health_.set(*health_component_, domains > 0);
  remember({std::chrono::system_clock::now(), true, std::string(what(from)), domains, {}});
  retry_the_other(from);
  return std::nullopt;
}

void rules_source::retry_the_other(rule_origin loaded) {
  // The other source's rules were refused for a domain this one gave, which may be free now. Files are still
  // on disk; a NACKed xDS response cannot be taken back, so the server is asked to send its rules again.
  if (loaded == rule_origin::xds && state(rule_origin::files).refused_for_a_domain) {
    core::log_info("Loading the rule files again: they were refused for a domain the xDS resources gave");
    load();
  } else if (loaded == rule_origin::files && state(rule_origin::xds).refused_for_a_domain && xds_retry_) {
    state(rule_origin::xds).refused_for_a_domain = false;
    xds_retry_();
  }
}

config::load_result rules_source::with_the_other(rule_origin from,
                                                 std::shared_ptr<const config::rule_set> own,
                                                 const std::vector<config::config_file>& files,
                                                 bool& conflict) {
  const rule_origin other = from == rule_origin::files ? rule_origin::xds : rule_origin::files;
  if (!state(other).rules) return {std::move(own), {}, {}};
  // The files' rules first, whichever changed.
  const auto& first = from == rule_origin::files ? *own : *state(other).rules;
  const auto& second = from == rule_origin::files ? *state(other).rules : *own;
  const auto shared = first.shared_domain(second);
  if (!shared) return {config::rule_set::union_of(first, second), {}, {}};
  if (!settings_.merge_domain_config) {
    conflict = true;
    return {nullptr,
            core::cat("domain '", *shared, "' is given by both ", origin_name(rule_origin::files), " ('",
                      first.origin(*shared)->file, "') and ", origin_name(rule_origin::xds), " ('",
                      second.origin(*shared)->file,
                      "'): a domain comes from one source unless MERGE_DOMAIN_CONFIG=true"),
            {}};
  }
  const auto& rule_files = from == rule_origin::files ? files : state(other).in_force;
  const auto& resources = from == rule_origin::files ? state(other).in_force : files;
  std::vector<config::config_file> all(rule_files.begin(), rule_files.end());
  all.insert(all.end(), resources.begin(), resources.end());
  return config::load_rules(all, true, stats_);
}

void rules_source::refuse(const std::string& error, rule_origin from) {
  load_error_.inc();
  core::log_error("Error loading new configuration: ", error);
  remember({std::chrono::system_clock::now(), false, std::string(what(from)), 0, error});
}

void rules_source::remember(reload_record r) {
  std::lock_guard lock(reloads_mutex_);
  reloads_.push_front(std::move(r));
  if (reloads_.size() > reloads_kept) reloads_.pop_back();
}

std::vector<reload_record> rules_source::recent_reloads() const {
  std::lock_guard lock(reloads_mutex_);
  return {reloads_.begin(), reloads_.end()};
}

void rules_source::watch(boost::asio::any_io_executor ex) {
  const auto& layout = settings_.layout;
  std::vector<core::file_watch::target> targets{{layout.rules_directory(), std::nullopt}};
  if (layout.watch_root) {
    std::filesystem::path root(layout.root);
    if (root.filename().empty()) root = root.parent_path();
    targets.push_back({root.parent_path().string(), root.filename().string()});
  }
  watch_ = std::make_unique<core::file_watch>(ex, std::move(targets), settings_.debounce, [this] { load(); });
  watch_->start();
}

void rules_source::stop() {
  if (watch_) watch_->stop();
}

}  // namespace sluice::ratelimit::service
