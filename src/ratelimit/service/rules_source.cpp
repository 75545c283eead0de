#include "ratelimit/service/rules_source.hpp"

#include <algorithm>
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
      load_error_(stats.get_counter("ratelimit.service.config_load_error")),
      removed_(stats) {
  if (settings_.healthy_with_at_least_one_config_loaded)
    health_component_ = health_.add_component("config", false);
}

std::string_view origin_name(rule_origin origin) {
  return origin == rule_origin::files ? "FILE" : "GRPC_XDS_SOTW";
}

namespace {

rule_origin other_than(rule_origin origin) {
  return origin == rule_origin::files ? rule_origin::xds : rule_origin::files;
}

// How the log and the dashboard's reloads name a source's sets of rules.
std::string_view what(rule_origin origin) {
  return origin == rule_origin::files ? "files" : "xDS resources";
}

}  // namespace

core::problem rules_source::load() {
  const auto& layout = settings_.layout;
  auto files =
      config::read_rule_files(layout.rules_directory(), layout.name_prefix(), layout.ignore_dotfiles);
  if (!files.error.empty()) {
    folder_as_loaded_ = false;
    refuse(files.error, rule_origin::files);
    return files.error;
  }
  return offer(rule_origin::files, std::move(files.files));
}

core::problem rules_source::apply_xds(std::vector<config::config_file> files) {
  return offer(rule_origin::xds, std::move(files));
}

core::problem rules_source::offer(rule_origin from, std::vector<config::config_file> files) {
  // With one source the files carry no source: /rlconfig stays upstream's.
  if (source_count() > 1)
    for (auto& f : files) f.source = origin_name(from);
  // Events that left the rule files as they were (the second half of a ConfigMap swap, a touch): nothing to
  // load, and no second "Successfully loaded" for one change.
  if (from == rule_origin::files && folder_as_loaded_ && files == state(from).in_force) {
    core::log_debug("the rule files are unchanged: not loaded again");
    return std::nullopt;
  }
  auto c = prepare(from, files);
  auto error = settle(from, std::move(files), std::move(c));
  if (from == rule_origin::files) folder_as_loaded_ = !error;
  return error;
}

limit_review review_limits(const config::rule_set& rules, const rules_source::limit_check& check) {
  limit_review review;
  rules.for_each_limit([&](std::string_view domain, const config::descriptor_node& node,
                           const config::rate_limit& l) {
    if (review.refused) return;
    auto verdict = check(node, l);
    if (verdict.why.empty()) return;
    auto said =
        core::cat("domain '", domain, "', rule '", config::rule_path(node, domain), "': ", verdict.why);
    if (verdict.refused)
      review.refused = std::move(said);
    else if (std::ranges::find(review.warnings, said) == review.warnings.end())  // (a rule's other limits)
      review.warnings.push_back(std::move(said));
  });
  return review;
}

rules_source::candidate rules_source::prepare(rule_origin from,
                                              const std::vector<config::config_file>& files) {
  candidate c;
  try {
    // Stats are made only for rules that come in: refused ones must not change a gauge of those in force.
    auto own = config::load_rules(files, settings_.merge_domain_config, stats_, false, tables_);
    c.own = std::move(own.rules);
    c.warnings = std::move(own.warnings);
    c.error = std::move(own.error);
    if (c.own && limit_check_) {
      auto review = review_limits(*c.own, limit_check_);
      if (review.refused) {
        c.error = std::move(*review.refused);
        c.own = nullptr;
      }
      for (auto& w : review.warnings) c.warnings.push_back(std::move(w));
    }
    if (c.own) join(from, files, c);
  } catch (const std::exception& e) {  // not a rule's error (those are config_errors): memory, most likely
    c = {};
    c.error = core::cat("the rules could not be loaded: ", e.what());
  }
  return c;
}

void rules_source::join(rule_origin from, const std::vector<config::config_file>& files, candidate& c) {
  const rule_origin other = other_than(from);
  if (!state(other).rules) {
    c.joined = c.own;
    return;
  }
  const bool files_changed = from == rule_origin::files;
  const auto& first = files_changed ? *c.own : *state(other).rules;
  const auto& second = files_changed ? *state(other).rules : *c.own;
  const auto shared = first.shared_domain(second);
  if (!shared) {
    c.joined = config::rule_set::union_of(first, second);
  } else if (!settings_.merge_domain_config) {
    c.conflict = true;
    c.error = core::cat("domain '", *shared, "' is given by both ", origin_name(rule_origin::files), " ('",
                        first.origin(*shared)->file, "') and ", origin_name(rule_origin::xds), " ('",
                        second.origin(*shared)->file,
                        "'): a domain comes from one source unless MERGE_DOMAIN_CONFIG=true");
  } else {
    std::vector<config::config_file> all(files_changed ? files : state(other).in_force);
    const auto& resources = files_changed ? state(other).in_force : files;
    all.insert(all.end(), resources.begin(), resources.end());
    auto merged = config::load_rules(all, true, stats_, false, tables_);
    c.joined = std::move(merged.rules);
    c.error = std::move(merged.error);
    c.merged = true;
  }
}

core::problem rules_source::settle(rule_origin from, std::vector<config::config_file> files, candidate c) {
  if (!c.error.empty()) {
    refuse(c.error, from);
    if (c.conflict)
      state(from).refused = held_back{std::move(files), std::move(c.own), std::move(c.warnings)};
    return c.error;
  }
  accept(from, std::move(files), std::move(c));
  retry_the_other(from);
  return std::nullopt;
}

void rules_source::accept(rule_origin from, std::vector<config::config_file> files, candidate c) {
  // Before anyone reads them. A merge's own nodes are kept for later joins, so they get stats too.
  config::make_rule_stats(*c.own, stats_);
  if (c.merged) config::make_rule_stats(*c.joined, stats_);
  for (const auto& w : c.warnings) core::log_warn(w);
  for (const auto& d : c.joined->domain_names()) core::log_info("loaded domain: ", d);
  const std::size_t count = files.size();
  state(from) = {std::move(files), std::move(c.own), std::nullopt};
  const std::size_t domains = c.joined->domain_count();
  // Posted to every worker before /rlconfig shows them (or an ACK tells the xDS server): a request sent after
  // either is served by these rules.
  publish_(c.joined);
  removed_.in_force(*c.joined);
  current_.store(std::move(c.joined));
  load_success_.inc();
  core::log_info("Successfully loaded new configuration (", count, " ", what(from), ", ", domains,
                 " domains)");
  if (health_component_) health_.set(*health_component_, domains > 0);
  remember({std::chrono::system_clock::now(), true, std::string(what(from)), domains, {}});
}

void rules_source::retry_the_other(rule_origin loaded) {
  auto& waiting = state(other_than(loaded)).refused;
  if (!waiting || waiting->rules->shared_domain(*state(loaded).rules)) return;  // none, or still in the way
  if (loaded == rule_origin::xds) {
    core::log_info("The rule files refused for a domain the xDS resources gave come in now");
    auto held = std::move(*waiting);
    waiting.reset();
    candidate c;
    c.own = std::move(held.rules);
    c.warnings = std::move(held.warnings);  // logged when they come in
    join(rule_origin::files, held.files, c);
    settle(rule_origin::files, std::move(held.files), std::move(c));
  } else {
    // A NACKed response cannot be taken back: the server is asked to send its rules again.
    waiting.reset();
    if (xds_retry_) xds_retry_();
  }
}

void rules_source::refuse(const std::string& error, rule_origin from) {
  state(from).refused.reset();  // only the source's latest load may wait for a domain
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
  xds_retry_ = nullptr;  // the client may be gone before this object
}

}  // namespace sluice::ratelimit::service
