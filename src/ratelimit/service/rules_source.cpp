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

std::optional<std::string> rules_source::load() {
  const auto& layout = settings_.layout;
  auto files =
      config::read_rule_files(layout.rules_directory(), layout.name_prefix(), layout.ignore_dotfiles);
  if (!files.error.empty()) {
    refuse(files.error, "files");
    return files.error;
  }
  return apply(files.files, "files");
}

std::optional<std::string> rules_source::apply(std::span<const config::config_file> files,
                                               std::string_view what) {
  auto loaded = config::load_rules(files, settings_.merge_domain_config, stats_);
  if (!loaded.error.empty()) {
    refuse(loaded.error, what);
    return loaded.error;
  }
  for (const auto& w : loaded.warnings) core::log_warn(w);
  for (const auto& d : loaded.rules->domain_names()) core::log_info("loaded domain: ", d);
  std::size_t domains = loaded.rules->domain_count();
  current_.store(loaded.rules);
  publish_(std::move(loaded.rules));
  load_success_.inc();
  core::log_info("Successfully loaded new configuration (", files.size(), " ", what, ", ", domains,
                 " domains)");
  if (health_component_) health_.set(*health_component_, domains > 0);
  remember({std::chrono::system_clock::now(), true, std::string(what), domains, {}});
  return std::nullopt;
}

void rules_source::refuse(const std::string& error, std::string_view what) {
  load_error_.inc();
  core::log_error("Error loading new configuration: ", error);
  remember({std::chrono::system_clock::now(), false, std::string(what), 0, error});
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
