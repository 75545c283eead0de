#include "ratelimit/config/yaml_loader.hpp"

#include "ratelimit/config/value_regex.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/config/limit_options.hpp"
#include "ratelimit/config/yaml_bounds.hpp"
#include "ratelimit/config/yaml_fields.hpp"
#include "ratelimit/config/yaml_metadata.hpp"
#include "ratelimit/config/yaml_scalar.hpp"

namespace sluice::ratelimit::config {

class rule_set_builder {
 public:
  rule_set_builder(bool merge, std::vector<std::string>& warnings, table_names* tables)
      : merge_(merge), warnings_(warnings), tables_(tables), rules_(std::make_shared<rule_set>()) {}

  void load_file(const config_file& file);
  std::shared_ptr<const rule_set> finish() { return std::move(rules_); }

 private:
  void load_descriptors(descriptor_node& parent, const YAML::Node& list, const std::string& domain);
  void load_descriptor(descriptor_node& parent, const YAML::Node& yaml, const std::string& domain);
  rate_limit load_rate_limit(const YAML::Node& yaml);
  void warn_misplaced(const YAML::Node& map, std::span<const std::string_view> meaningful,
                      std::string_view where);

  bool merge_;
  std::vector<std::string>& warnings_;
  table_names* tables_;
  std::shared_ptr<rule_set> rules_;
  std::string file_;
};

namespace {

constexpr std::array<std::string_view, 28> allowed_keys{"domain",
                                                        "key",
                                                        "value",
                                                        "value_regex",
                                                        "descriptors",
                                                        "rate_limit",
                                                        "unit",
                                                        "requests_per_unit",
                                                        "unlimited",
                                                        "shadow_mode",
                                                        "quota_mode",
                                                        "name",
                                                        "replaces",
                                                        "detailed_metric",
                                                        "value_to_metric",
                                                        "share_threshold",
                                                        "metadata",
                                                        "rate_limits",
                                                        "algorithm",
                                                        "unit_multiplier",
                                                        "burst",
                                                        "accounting",
                                                        "time_zone",
                                                        "lease",
                                                        "holder_key",
                                                        "near_limit_ratio",
                                                        "count_only_admitted",
                                                        "limits_from"};
constexpr std::array<std::string_view, 2> top_level_keys{"domain", "descriptors"};
constexpr std::array<std::string_view, 15> descriptor_keys{
    "key",         "value",       "value_regex",      "rate_limit",          "descriptors",
    "shadow_mode", "quota_mode",  "detailed_metric",  "value_to_metric",     "share_threshold",
    "metadata",    "rate_limits", "near_limit_ratio", "count_only_admitted", "limits_from"};
constexpr std::array<std::string_view, 12> rate_limit_keys{
    "unit",  "requests_per_unit", "unlimited", "name",  "replaces",  "algorithm", "unit_multiplier",
    "burst", "accounting",        "time_zone", "lease", "holder_key"};
constexpr std::array<std::string_view, 1> replaces_keys{"name"};

// upstream's second pass: every map key is a known string, lists hold maps, scalars are strings, ints or
// bools, within the bounds on aliasing and depth (yaml_bounds.hpp).
void validate_keys(const YAML::Node& node, expansion& walk) {
  const walk_level level(node, walk);
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      const YAML::Node& k = kv.first;
      if (!k.IsScalar() || classify_scalar(k) != scalar_kind::string) {
        throw config_error{
            core::cat("config error, key is not of type string: ", k.IsScalar() ? k.Scalar() : "")};
      }
      const std::string& name = k.Scalar();
      if (!seen.insert(name).second) already_defined(k);
      if (std::ranges::find(allowed_keys, name) == allowed_keys.end()) {
        throw config_error{core::cat("config error, unknown key '", name, "'")};
      }
      if (name == "metadata") {
        bound_metadata(kv.second, walk);
      } else if (name == "near_limit_ratio" && kv.second.IsScalar()) {
        // The one key whose value is a fraction; load_rule_options checks it.
      } else {
        validate_keys(kv.second, walk);
      }
    }
  } else if (node.IsSequence()) {
    for (const auto& element : node) {
      if (!element.IsMap()) {
        throw config_error{core::cat("config error, yaml file contains list of type other than map: ",
                                     element.IsScalar() ? element.Scalar() : "a list")};
      }
      validate_keys(element, walk);
    }
  } else if (node.IsScalar()) {
    auto kind = classify_scalar(node);
    if (kind != scalar_kind::string && kind != scalar_kind::integer && kind != scalar_kind::boolean &&
        kind != scalar_kind::null) {
      throw config_error{
          core::cat("error checking config: value '", node.Scalar(),
                    "' is not a string, an integer or a boolean (quote it to make it a string)")};
    }
  }
}

}  // namespace

void rule_set_builder::warn_misplaced(const YAML::Node& map, std::span<const std::string_view> meaningful,
                                      std::string_view where) {
  for (const auto& kv : map) {
    const std::string& name = kv.first.Scalar();
    if (std::ranges::find(meaningful, name) == meaningful.end()) {
      warnings_.push_back(core::cat(file_, ": key '", name, "' (line ", kv.first.Mark().line + 1,
                                    ") has no meaning ", where, " and is ignored"));
    }
  }
}

void rule_set_builder::load_file(const config_file& file) {
  file_ = file.name;
  YAML::Node root;
  try {
    root = YAML::Load(file.content);
  } catch (const YAML::Exception& e) {
    throw config_error{core::cat("error loading config file: yaml: line ", e.mark.line + 1, ": ", e.msg)};
  }
  if (root.IsNull()) throw config_error{"config file cannot have empty domain"};
  if (!root.IsMap()) {
    throw config_error{
        "error loading config file: the top level must be a mapping with 'domain' and 'descriptors'"};
  }
  expansion walk;
  validate_keys(root, walk);
  warn_misplaced(root, top_level_keys, "at the top level");

  std::string domain = scalar_string(root["domain"], "domain");
  if (domain.empty()) throw config_error{"config file cannot have empty domain"};
  auto& slot = rules_->domains_[domain];
  auto& origin = rules_->origins_[domain];
  if (slot) {
    if (!merge_) throw config_error{core::cat("duplicate domain '", domain, "' in config file")};
    core::log_debug("patching domain: ", domain);
  } else {
    core::log_debug("loading domain: ", domain);
    slot = std::make_shared<descriptor_node>();
    slot->key = domain;
    slot->stats_key = domain;
    origin.file = file.name;
  }
  if (!file.source.empty() && !std::ranges::count(origin.sources, file.source))
    origin.sources.push_back(file.source);
  expect_list(root["descriptors"], "descriptors");
  load_descriptors(*slot, root["descriptors"], domain);
}

void rule_set_builder::load_descriptors(descriptor_node& parent, const YAML::Node& list,
                                        const std::string& domain) {
  if (!list || list.IsNull()) return;
  for (const auto& yaml : list) load_descriptor(parent, yaml, domain);
  if (!parent.regex_children.empty()) compile_value_regexes(parent);
}

void rule_set_builder::load_descriptor(descriptor_node& parent, const YAML::Node& yaml,
                                       const std::string& domain) {
  warn_misplaced(yaml, descriptor_keys, "in a descriptor");
  auto node = std::make_unique<descriptor_node>();
  node->key = scalar_string(yaml["key"], "key");
  node->value = scalar_string(yaml["value"], "value");
  node->value_regex = scalar_string(yaml["value_regex"], "value_regex");
  if (node->key.empty()) throw config_error{"descriptor has empty key"};
  const bool regex = yaml["value_regex"] && !yaml["value_regex"].IsNull();
  if (regex) check_value_regex(*node, yaml["value"] && !yaml["value"].IsNull(), parent.stats_key);

  // A value_regex rule's path names its pattern (its stats key, /rlconfig): "<key>_<pattern>".
  std::string composite = node->value.empty() && !regex
                              ? node->key
                              : core::cat(node->key, "_", regex ? node->value_regex : node->value);
  node->stats_key = core::cat(parent.stats_key, ".", composite);
  if (regex || !parent.stat_name_when_other.empty()) {
    const auto level = regex ? core::cat(node->key, "_", stats::one_level(node->value_regex)) : composite;
    node->stat_name_when_other = core::cat(parent.stat_name(), ".", level);
  }
  const bool taken = parent.children.contains(composite) ||
                     std::ranges::any_of(parent.regex_children,
                                         [&](const auto& r) { return r->stats_key == node->stats_key; });
  if (taken) throw config_error{core::cat("duplicate descriptor composite key '", node->stats_key, "'")};

  node->shadow_mode = scalar_bool(yaml["shadow_mode"], "shadow_mode");
  node->quota_mode = scalar_bool(yaml["quota_mode"], "quota_mode");
  node->detailed_metric = scalar_bool(yaml["detailed_metric"], "detailed_metric");
  node->value_to_metric = scalar_bool(yaml["value_to_metric"], "value_to_metric");
  node->share_threshold = scalar_bool(yaml["share_threshold"], "share_threshold");
  if (const auto& metadata = yaml["metadata"]; metadata && !metadata.IsNull()) {
    try {
      node->metadata = metadata_from_yaml(metadata);
    } catch (const std::invalid_argument& e) {
      throw config_error{core::cat("error parsing metadata: ", e.what())};
    }
  }

  if (const auto& rl = yaml["rate_limit"]; rl && !rl.IsNull()) {
    if (!rl.IsMap()) throw config_error{"error loading config file: rate_limit: expected a mapping"};
    node->limit = load_rate_limit(rl);
  }
  expect_list(yaml["rate_limits"], "rate_limits");
  if (const auto& list = yaml["rate_limits"]; list && list.IsSequence()) {
    for (const auto& rl : list) {
      auto limit = load_rate_limit(rl);
      if (limit.unlimited) throw config_error{"rate_limits: an unlimited limit belongs in rate_limit"};
      if (node->limit && node->limit->unlimited)
        throw config_error{"rate_limits: the descriptor's rate_limit is unlimited"};
      if (node->limit) {
        node->more_limits.push_back(std::move(limit));
      } else {
        node->limit = std::move(limit);
      }
    }
  }
  load_rule_options(yaml, *node);
  finish_limits(*node, tables_);
  if (node->share_threshold && regex) {
    throw config_error{core::cat("share_threshold is for '*' values; the value_regex rule '", node->stats_key,
                                 "' counts each value it matches on its own")};
  }
  if (node->share_threshold && composite.find('*') == std::string::npos) {
    throw config_error{
        core::cat("share_threshold can only be used with wildcard values (containing '*'), but found "
                  "key '",
                  composite, "'")};
  }
  if (!regex && node->value.find('*') != std::string::npos) {
    std::string_view rest = composite;
    for (auto star = rest.find('*'); star != std::string_view::npos; star = rest.find('*')) {
      node->wildcard_parts.emplace_back(rest.substr(0, star));
      rest.remove_prefix(star + 1);
    }
    node->wildcard_parts.emplace_back(rest);
  }
  if (node->limit) {
    const auto& l = *node->limit;
    core::log_debug("loading descriptor: key=", node->stats_key,
                    " ratelimit={requests_per_unit=", l.requests_per_unit, ", unit=", unit_name(l.unit),
                    ", unlimited=", l.unlimited, ", shadow_mode=", node->shadow_mode,
                    ", quota_mode=", node->quota_mode, "}");
  }

  expect_list(yaml["descriptors"], "descriptors");
  load_descriptors(*node, yaml["descriptors"], domain);

  if (regex) {
    parent.regex_children.push_back(std::move(node));  // compiled with its level's others (load_descriptors)
    return;
  }
  const descriptor_node* raw = node.get();
  parent.children.emplace(std::move(composite), std::move(node));
  if (raw->is_wildcard()) parent.wildcard_children.push_back(raw);
}

rate_limit rule_set_builder::load_rate_limit(const YAML::Node& yaml) {
  warn_misplaced(yaml, rate_limit_keys, "in a rate_limit");
  rate_limit limit;
  limit.requests_per_unit = scalar_uint32(yaml["requests_per_unit"], "requests_per_unit");
  limit.unlimited = scalar_bool(yaml["unlimited"], "unlimited");
  limit.name = scalar_string(yaml["name"], "name");
  std::string unit_text = scalar_string(yaml["unit"], "unit");
  auto parsed = parse_unit(unit_text);
  // A concurrency limit counts what is in flight, not per unit of time: its unit may be left out.
  const bool concurrency =
      yaml["algorithm"] && yaml["algorithm"].IsScalar() && yaml["algorithm"].Scalar() == "concurrency";
  if (limit.unlimited) {
    if (parsed) throw config_error{"should not specify rate limit unit when unlimited"};
  } else if (parsed) {
    limit.unit = *parsed;
  } else if (!concurrency || !unit_text.empty()) {
    throw config_error{core::cat("invalid rate limit unit '", unit_text, "'")};
  }
  load_limit_options(yaml, limit);
  expect_list(yaml["replaces"], "replaces");
  if (const auto& replaces = yaml["replaces"]; replaces && replaces.IsSequence()) {
    for (const auto& r : replaces) {
      warn_misplaced(r, replaces_keys, "in a replaces entry");
      std::string name = scalar_string(r["name"], "replaces.name");
      if (name.empty()) throw config_error{"should not have an empty replaces entry"};
      if (name == limit.name) throw config_error{"replaces should not contain name of same descriptor"};
      limit.replaces.push_back(std::move(name));
    }
  }
  return limit;
}

void make_rule_stats(const rule_set& rules, stats::store& stats) {
  for (const auto& [_, domain] : rules.domains_) bind_stats(*domain, stats);
}

load_result load_rules(std::span<const config_file> files, bool merge_domains, stats::store& stats,
                       bool make_stats, table_names* tables) {
  load_result result;
  rule_set_builder builder(merge_domains, result.warnings, tables);
  for (const auto& file : files) {
    try {
      builder.load_file(file);
    } catch (const config_error& e) {
      result.error = core::cat(file.name, ": ", e.message);
      return result;
    }
  }
  result.rules = builder.finish();
  if (make_stats) make_rule_stats(*result.rules, stats);
  return result;
}

}  // namespace sluice::ratelimit::config
