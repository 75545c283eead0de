// libFuzzer: arbitrary bytes as a YAML rate limit rule file. Checks: no crash, no leak, no exception (the
// loader reports errors as values), bounded time and memory whatever the aliases expand to; a refused file
// has an error naming it; a loaded rule set written back as YAML (by the harness, below) loads to the same
// rules; and every rule reached by exact values only is what get_limit finds for those values.
//
// Build and run: scripts/fuzz rules_yaml [seconds]

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/yaml_quoted.hpp"
#include "ratelimit/config/yaml_loader.hpp"

namespace {

using sluice::test::yaml_quoted;

namespace config = sluice::ratelimit::config;

void check(bool ok) {
  if (!ok) std::abort();
}

// Past these the rules are not written back (yaml-cpp's own depth limit; a large tree is slow to compare).
constexpr std::size_t max_round_trip_depth = 64;
constexpr std::size_t max_round_trip_nodes = 4096;

void size_of(const config::descriptor_node& node, std::size_t depth, std::size_t& nodes,
             std::size_t& deepest) {
  ++nodes;
  deepest = std::max(deepest, depth);
  node.for_each_child(
      [&](const config::descriptor_node& child) { size_of(child, depth + 1, nodes, deepest); });
}

void write_node(const config::descriptor_node& node, std::string& out);

// Wildcard children first, in declaration order (the order get_limit tries them), then the others.
void write_children(const config::descriptor_node& node, std::string& out) {
  out += "descriptors: [";
  for (const auto* child : node.wildcard_children) {
    write_node(*child, out);
    out += ", ";
  }
  for (const auto& [_, child] : node.children) {
    if (child->is_wildcard()) continue;
    write_node(*child, out);
    out += ", ";
  }
  for (const auto& child : node.regex_children) {  // in file order: the order they are tried
    write_node(*child, out);
    out += ", ";
  }
  out += "]";
}

void write_limit(const config::rate_limit& l, std::string& out) {
  out += "{requests_per_unit: " + std::to_string(l.requests_per_unit);
  if (l.unlimited) out += ", unlimited: true";
  if (l.unit != config::unit::unknown) out += ", unit: " + std::string(config::unit_name(l.unit));
  if (!l.name.empty()) out += ", name: " + yaml_quoted(l.name);
  out += ", algorithm: " + std::string(config::algorithm_name(l.algorithm));
  if (!l.unlimited) out += ", unit_multiplier: " + std::to_string(l.unit_multiplier);
  if (l.burst != 0) out += ", burst: " + std::to_string(l.burst);
  out += ", replaces: [";
  for (const auto& r : l.replaces) out += "{name: " + yaml_quoted(r) + "}, ";
  out += "]}";
}

bool same_limit(const config::rate_limit& a, const config::rate_limit& b) {
  return a.requests_per_unit == b.requests_per_unit && a.unit == b.unit && a.name == b.name &&
         a.unlimited == b.unlimited && a.replaces == b.replaces && a.algorithm == b.algorithm &&
         a.unit_multiplier == b.unit_multiplier && a.burst == b.burst && a.key_tag == b.key_tag &&
         a.stats_suffix == b.stats_suffix;
}

void write_node(const config::descriptor_node& node, std::string& out) {
  out += "{key: " + yaml_quoted(node.key);
  out += node.value_regex.empty() ? ", value: " + yaml_quoted(node.value)
                                  : ", value_regex: " + yaml_quoted(node.value_regex);
  for (auto [name, set] : {std::pair{"shadow_mode", node.shadow_mode},
                           {"quota_mode", node.quota_mode},
                           {"detailed_metric", node.detailed_metric},
                           {"value_to_metric", node.value_to_metric},
                           {"share_threshold", node.share_threshold}}) {
    if (set) out += std::string(", ") + name + ": true";
  }
  if (node.count_only_admitted) out += ", count_only_admitted: true";
  if (node.near_limit_ratio) {
    char ratio[40];
    std::snprintf(ratio, sizeof ratio, "%.17g", *node.near_limit_ratio);
    out += std::string(", near_limit_ratio: ") + ratio;
  }
  if (node.limit) {
    out += ", rate_limit: ";
    write_limit(*node.limit, out);
  }
  if (!node.more_limits.empty()) {
    out += ", rate_limits: [";
    for (const auto& l : node.more_limits) {
      write_limit(l, out);
      out += ", ";
    }
    out += "]";
  }
  out += ", ";
  write_children(node, out);
  out += "}";
}

void check_same(const config::descriptor_node& a, const config::descriptor_node& b) {
  check(a.key == b.key && a.value == b.value && a.value_regex == b.value_regex && a.stats_key == b.stats_key);
  check(a.shadow_mode == b.shadow_mode && a.quota_mode == b.quota_mode &&
        a.detailed_metric == b.detailed_metric && a.value_to_metric == b.value_to_metric &&
        a.share_threshold == b.share_threshold);
  check(a.limit.has_value() == b.limit.has_value());
  if (a.limit) check(same_limit(*a.limit, *b.limit));
  check(a.more_limits.size() == b.more_limits.size());
  for (std::size_t i = 0; i < a.more_limits.size(); ++i)
    check(same_limit(a.more_limits[i], b.more_limits[i]));
  check(a.near_limit_ratio == b.near_limit_ratio && a.count_only_admitted == b.count_only_admitted);
  check(a.wildcard_parts == b.wildcard_parts);
  check(a.children.size() == b.children.size() && a.wildcard_children.size() == b.wildcard_children.size());
  for (std::size_t i = 0; i < a.wildcard_children.size(); ++i)
    check(a.wildcard_children[i]->stats_key == b.wildcard_children[i]->stats_key);
  for (const auto& [composite, child] : a.children) {
    const auto it = b.children.find(composite);
    check(it != b.children.end());
    check_same(*child, *it->second);
  }
  check(a.regex_children.size() == b.regex_children.size() && a.regex_by_key.size() == b.regex_by_key.size());
  for (std::size_t i = 0; i < a.regex_children.size(); ++i)
    check_same(*a.regex_children[i], *b.regex_children[i]);
}

// Internal consistency of one node, and get_limit along the path of exact values that leads to it.
void check_node(const config::rule_set& rules, const config::descriptor_node& domain,
                const config::descriptor_node& node, std::vector<config::entry>& path, bool exact_path) {
  const bool counted = node.limit && !node.limit->unlimited;
  check(!node.limit || (node.limit->stats.total_hits != nullptr) == counted);
  check(node.more_limits.empty() || node.limit);
  for (const auto& l : node.more_limits) {
    check(l.stats.total_hits != nullptr && !l.key_tag.empty() && !l.stats_suffix.empty());
    check(l.unit_multiplier >= 1 && (l.burst == 0 || l.algorithm == config::algorithm::gcra));
  }
  // Only the single fixed window of one unit keeps upstream's key (and so no tag).
  if (counted)
    check(node.limit->key_tag.empty() == (node.more_limits.empty() && node.limit->unit_multiplier == 1 &&
                                          node.limit->algorithm == config::algorithm::fixed_window));
  check(node.is_wildcard() == (node.value.find('*') != std::string::npos));
  if (exact_path && !path.empty()) {
    const auto found = rules.get_limit(domain, path);
    check(found.node == (node.limit ? &node : nullptr));
  }
  std::size_t wildcards = 0;
  for (const auto& [composite, child] : node.children) {
    check(composite == (child->value.empty() ? child->key : child->key + "_" + child->value));
    check(child->stats_key == node.stats_key + "." + composite);
    wildcards += child->is_wildcard() ? 1 : 0;
    path.push_back({child->key, child->value});
    check_node(rules, domain, *child, path, exact_path && !child->value.empty() && !child->is_wildcard());
    path.pop_back();
  }
  check(wildcards == node.wildcard_children.size());
  // value_regex rules: their path names the pattern, their set holds them all, and none is reached by name.
  std::size_t in_sets = 0;
  for (const auto& [key, rules] : node.regex_by_key) {
    check(rules.set != nullptr && !rules.nodes.empty());
    for (const auto* n : rules.nodes) check(n->key == key);
    in_sets += rules.nodes.size();
  }
  check(in_sets == node.regex_children.size());
  for (const auto& child : node.regex_children) {
    check(!child->value_regex.empty() && child->value.empty() && !child->is_wildcard());
    check(child->stats_key == node.stats_key + "." + child->key + "_" + child->value_regex);
    path.push_back({child->key, child->value_regex});
    check_node(rules, domain, *child, path, false);
    path.pop_back();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<config::config_file> files{
      {"fuzz.yaml", std::string(reinterpret_cast<const char*>(data), size)}};
  sluice::stats::store stats;
  const auto loaded = config::load_rules(files, false, stats);
  if (!loaded.rules) {
    check(loaded.error.starts_with("fuzz.yaml: ") && loaded.error.size() > 11);
    return 0;
  }
  check(loaded.error.empty());
  const auto& rules = *loaded.rules;
  const auto names = rules.domain_names();
  check(names.size() == 1 && rules.domain_count() == 1);
  const auto* domain = rules.find_domain(names[0]);
  check(domain != nullptr && domain->key == names[0] && !domain->limit);
  std::vector<config::entry> path;
  check_node(rules, *domain, *domain, path, true);
  (void)rules.dump();

  std::size_t nodes = 0, depth = 0;
  size_of(*domain, 0, nodes, depth);
  if (nodes > max_round_trip_nodes || depth > max_round_trip_depth) return 0;
  std::string yaml = "domain: " + yaml_quoted(domain->key) + "\n";
  write_children(*domain, yaml);
  const std::vector<config::config_file> written{{"written.yaml", yaml + "\n"}};
  sluice::stats::store stats_again;
  const auto again = config::load_rules(written, false, stats_again);
  check(again.rules != nullptr);
  const auto* domain_again = again.rules->find_domain(names[0]);
  check(domain_again != nullptr);
  check_same(*domain, *domain_again);
  check(rules.dump() == again.rules->dump());
  return 0;
}
