#include "ratelimit/config/rule_explain.hpp"

#include <algorithm>

#include "core/strings.hpp"

namespace sluice::ratelimit::config {

namespace {

std::string entry_text(const entry& e) {
  return core::cat(e.key, "=", e.value);
}

std::string rule_value(const descriptor_node& n) {
  if (!n.value_regex.empty()) return core::cat("value_regex '", n.value_regex, "'");
  if (n.is_wildcard()) return core::cat("pattern '", n.value, "'");
  if (n.value.empty()) return "any value (key alone)";
  return core::cat("value '", n.value, "'");
}

// Why `child` did not take entry `e` (it was compared and lost, or never could).
std::string why_not(const descriptor_node& child, const entry& e) {
  if (child.key != e.key)
    return core::cat("key differs: the rule wants key '", child.key, "', the request has '", e.key, "'");
  if (!child.value_regex.empty())
    return core::cat("the value '", e.value, "' does not match value_regex '", child.value_regex, "'");
  if (child.is_wildcard())
    return core::cat("the value '", e.value, "' does not match pattern '", child.value, "'");
  return core::cat("value differs: the rule wants '", child.value, "', the request has '", e.value, "'");
}

// Levenshtein distance, capped: how near a rule's key is to a mistyped one ("usr" and "user").
std::size_t distance(std::string_view a, std::string_view b) {
  constexpr std::size_t cap = 64;
  a = a.substr(0, cap);
  b = b.substr(0, cap);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The children of `parent` that could have taken `e`: same key first, then the nearest keys.
void add_misses(const descriptor_node& parent, const entry& e, std::size_t level,
                std::vector<near_miss>& out) {
  std::vector<std::pair<std::size_t, near_miss>> misses;
  parent.for_each_child([&](const descriptor_node& child) {
    misses.push_back({distance(child.key, e.key), {&child, level, why_not(child, e)}});
  });
  std::ranges::sort(misses, [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second.node->stats_key < b.second.node->stats_key;
  });
  for (auto& m : misses) out.push_back(std::move(m.second));
}

}  // namespace

std::string_view matched_by_name(matched_by how) {
  switch (how) {
    case matched_by::exact:
      return "exact";
    case matched_by::wildcard:
      return "wildcard";
    case matched_by::regex:
      return "value_regex";
    case matched_by::key_only:
      return "key_only";
  }
  return "exact";
}

explanation explain_match(const descriptor_node& domain, std::span<const entry> entries,
                          std::size_t max_candidates) {
  explanation out;
  const descriptor_node* parent = &domain;
  std::string composite;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const auto [node, how] = match_level(*parent, e, composite);
    if (node == nullptr) {
      out.outcome = core::cat(
          "no rule at level ", i + 1, " takes ", entry_text(e),
          parent == &domain ? std::string(" in this domain") : core::cat(" under ", parent->stats_key));
      add_misses(*parent, e, i, out.candidates);
      break;
    }
    out.path.push_back({node, how});
    const bool last = i + 1 == entries.size();
    if (last && node->limit) {
      out.rule = node;
      out.outcome =
          core::cat("matched ", node->stats_key, " (", matched_by_name(how), ") at the request's last entry");
      break;
    }
    if (last) {
      // The request ends where the rules go on: a limit applies only at the depth of the last entry.
      out.outcome = core::cat(node->stats_key, " has no rate_limit of its own, and the request ends there");
      node->for_each_child([&](const descriptor_node& child) {
        out.candidates.push_back({&child, i + 1,
                                  core::cat("deeper level missing: the rule goes on with key '", child.key,
                                            "' (", rule_value(child), ") after ", entry_text(e))});
      });
      break;
    }
    if (!node->has_children()) {
      out.outcome = core::cat(node->stats_key, " has no deeper level for ", entry_text(entries[i + 1]),
                              ": a limit applies only at the depth of the request's last entry");
      out.candidates.push_back({node, i + 1,
                                core::cat("the request is deeper than the rule: it has ", entries.size(),
                                          " entries, the rule ", i + 1)});
      break;
    }
    parent = node;
  }
  if (out.outcome.empty()) out.outcome = "the descriptor has no entries";
  if (out.candidates.size() > max_candidates) out.candidates.resize(max_candidates);
  return out;
}

}  // namespace sluice::ratelimit::config
