#include "ratelimit/config/rule_set.hpp"

#include "ratelimit/config/value_regex.hpp"

#include <boost/container/small_vector.hpp>

#include <algorithm>

#include "core/strings.hpp"
#include "ratelimit/config/limit_options.hpp"

namespace sluice::ratelimit::config {

std::string rule_stats::prefix(std::string_view stats_key) {
  return core::cat("ratelimit.service.rate_limit.", stats::sanitize_stat_name(stats_key), ".");
}

rule_stats rule_stats::make(stats::store& store, std::string_view stats_key) {
  const std::string prefix = rule_stats::prefix(stats_key);
  auto get = [&](std::string_view stat) { return &store.get_counter(prefix + std::string(stat)); };
  return {
      get("total_hits"),   get("over_limit"),  get("near_limit"),         get("over_limit_with_local_cache"),
      get("within_limit"), get("shadow_mode"), get("total_negative_hits")};
}

rule_stats rule_stats::make_bounded(stats::store& store, std::string_view domain,
                                    std::string_view stats_key) {
  const std::string prefix = rule_stats::prefix(stats_key);
  std::string overflow =
      core::cat("ratelimit.service.rate_limit.", stats::sanitize_stat_name(domain), ".overflow.");
  auto get = [&](std::string_view stat) {
    return &store.get_counter_bounded(prefix + std::string(stat), overflow + std::string(stat));
  };
  return {
      get("total_hits"),   get("over_limit"),  get("near_limit"),         get("over_limit_with_local_cache"),
      get("within_limit"), get("shadow_mode"), get("total_negative_hits")};
}

namespace {

void visit_limits(
    std::string_view domain, const descriptor_node& node,
    const std::function<void(std::string_view, const descriptor_node&, const rate_limit&)>& visit) {
  if (node.limit) visit(domain, node, *node.limit);
  for (const auto& more : node.more_limits) visit(domain, node, more);
  node.for_each_child([&](const descriptor_node& child) { visit_limits(domain, child, visit); });
}

}  // namespace

void rule_set::for_each_limit(
    const std::function<void(std::string_view, const descriptor_node&, const rate_limit&)>& visit) const {
  for (const auto& [name, root] : domains_) visit_limits(name, *root, visit);
}

std::string_view rule_path(const descriptor_node& node, std::string_view domain) {
  std::string_view path = node.stats_key;
  if (path.size() > domain.size() && path.starts_with(domain) && path[domain.size()] == '.')
    path.remove_prefix(domain.size() + 1);
  return path;
}

std::string limit_stats_key(const descriptor_node& node, const rate_limit& limit) {
  return limit.stats_suffix.empty() ? node.stat_name() : core::cat(node.stat_name(), ".", limit.stats_suffix);
}

const descriptor_node* rule_set::find_domain(std::string_view domain) const {
  auto it = domains_.find(domain);
  return it == domains_.end() ? nullptr : it->second.get();
}

namespace {

struct level {
  const descriptor_node* node;
  matched_by how;
};

// The stats key built from the request (detailed_metric) or from the runtime values (value_to_metric).
std::optional<std::string> runtime_stats_key(const descriptor_node& domain, const descriptor_node& leaf,
                                             std::span<const level> levels, std::span<const entry> entries) {
  bool any_share = std::ranges::any_of(levels, [](const level& l) { return l.node->share_threshold; });
  bool any_value_to_metric =
      std::ranges::any_of(levels, [](const level& l) { return l.node->value_to_metric; });
  if (!leaf.detailed_metric && !any_value_to_metric) return std::nullopt;

  std::string key = domain.stats_key;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const auto& [node, how] = levels[i];
    const auto& e = entries[i];
    key += '.';
    key += e.key;
    if (node->share_threshold && how == matched_by::wildcard) {
      key += core::cat("_", node->value);
    } else if (leaf.detailed_metric) {
      // upstream renders an empty request value as "key_", except when share_threshold is in play.
      if (!e.value.empty() || !any_share) key += core::cat("_", e.value);
    } else if (how == matched_by::exact) {
      key += core::cat("_", node->value);
    } else if (node->value_to_metric) {
      if (!e.value.empty()) key += core::cat("_", e.value);
    } else if (how == matched_by::wildcard) {
      key += core::cat("_", node->value);
    } else if (how == matched_by::regex) {
      key += core::cat("_", stats::one_level(node->value_regex));  // the pattern's rule, as its default key
    }
  }
  if (key == leaf.stat_name()) return std::nullopt;
  return key;
}

}  // namespace

namespace {

const descriptor_node* find_child(const descriptor_node& parent, std::string_view composite) {
  auto it = parent.children.find(composite);
  return it == parent.children.end() ? nullptr : it->second.get();
}

}  // namespace

level_match match_level(const descriptor_node& parent, const entry& e, std::string& composite) {
  composite.assign(e.key).append("_").append(e.value);
  if (const auto* node = find_child(parent, composite)) return {node, matched_by::exact};
  for (const descriptor_node* w : parent.wildcard_children) {
    if (wildcard_match(w->wildcard_parts, composite)) return {w, matched_by::wildcard};
  }
  if (!parent.regex_by_key.empty()) {
    // value_regex rules of this key: the first in file order whose pattern matches the whole value.
    if (auto rx = parent.regex_by_key.find(e.key); rx != parent.regex_by_key.end()) {
      if (const int k = rx->second.set->first_match(e.value); k >= 0)
        return {rx->second.nodes[static_cast<std::size_t>(k)], matched_by::regex};
    }
  }
  return {find_child(parent, e.key), matched_by::key_only};
}

match rule_set::get_limit(const descriptor_node& domain, std::span<const entry> entries) const {
  match result;
  boost::container::small_vector<level, 8> levels;  // a typical descriptor: no allocation
  const descriptor_node* parent = &domain;
  std::string composite;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto [node, how] = match_level(*parent, entries[i], composite);
    if (node == nullptr) break;
    levels.push_back({node, how});
    // A limit applies only when the request's last entry lands on it (the depth rule).
    if (node->limit && i + 1 == entries.size()) result.node = node;
    if (!node->has_children()) break;
    parent = node;
  }
  if (result.node == nullptr) return result;

  if (std::ranges::any_of(levels, [](const level& l) { return l.node->share_threshold; })) {
    result.shared_values.resize(entries.size());
    for (std::size_t i = 0; i < levels.size(); ++i) {
      if (levels[i].node->share_threshold && levels[i].how == matched_by::wildcard) {
        result.shared_values[i] = levels[i].node->value;
      }
    }
  }
  result.stats_key = runtime_stats_key(domain, *result.node, levels, entries);
  return result;
}

const std::string* rule_set::holder_key_below(const descriptor_node& domain,
                                              std::span<const entry> entries) const {
  const descriptor_node* node = &domain;
  std::string composite;
  for (const auto& e : entries) {
    node = match_level(*node, e, composite).node;
    if (node == nullptr) return nullptr;
  }
  const auto per_holder = [](const rate_limit& l) { return !l.holder_key.empty(); };
  for (const auto& [_, child] : node->children) {
    if (child->limit && (per_holder(*child->limit) || std::ranges::any_of(child->more_limits, per_holder)))
      return &child->key;
  }
  return nullptr;
}

namespace {

void dump_limit(const descriptor_node& node, const rate_limit& l, std::vector<std::string>& lines) {
  const std::string key =
      l.stats_suffix.empty() ? node.stats_key : core::cat(node.stats_key, ".", l.stats_suffix);
  lines.push_back(core::cat(
      key, ": unit=", l.unlimited ? "UNKNOWN" : unit_name(l.unit), " requests_per_unit=", l.requests_per_unit,
      ", shadow_mode: ", node.shadow_mode, ", quota_mode: ", node.quota_mode, describe_options(l),
      node.limits_from.empty() ? "" : core::cat(", limits_from: ", node.limits_from), "\n"));
}

void dump_node(const descriptor_node& node, std::vector<std::string>& lines) {
  if (node.limit) dump_limit(node, *node.limit, lines);
  for (const auto& l : node.more_limits) dump_limit(node, l, lines);
  node.for_each_child([&](const descriptor_node& child) { dump_node(child, lines); });
}

}  // namespace

std::string rule_set::dump() const {
  std::vector<std::string> lines;
  for (const auto& [_, domain] : domains_) dump_node(*domain, lines);
  std::ranges::sort(lines);
  std::string out;
  for (const auto& l : lines) out += l;
  return out;
}

std::vector<std::string> rule_set::domain_names() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : domains_) names.push_back(name);
  std::ranges::sort(names);
  return names;
}

const rule_set::domain_origin* rule_set::origin(std::string_view domain) const {
  auto it = origins_.find(domain);
  return it == origins_.end() ? nullptr : &it->second;
}

std::string rule_set::dump_sources() const {
  std::string out;
  for (const auto& [domain, o] : origins_) {
    if (!o.sources.empty())
      core::append_to(out, "domain=", domain, " source=", core::join(o.sources, ","), "\n");
  }
  return out;
}

std::optional<std::string> rule_set::shared_domain(const rule_set& other) const {
  for (const auto& [domain, _] : origins_) {
    if (other.domains_.contains(domain)) return domain;
  }
  return std::nullopt;
}

std::shared_ptr<const rule_set> rule_set::union_of(const rule_set& first, const rule_set& second) {
  auto out = std::make_shared<rule_set>(first);
  for (const auto& [domain, node] : second.domains_) out->domains_.emplace(domain, node);
  for (const auto& [domain, o] : second.origins_) out->origins_.emplace(domain, o);
  return out;
}

}  // namespace sluice::ratelimit::config
