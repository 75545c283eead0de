#pragma once
// "Why was this request limited?" (POST /explain,
// docs/guides/operate.md#explain-why-was-this-request-limited): the walk rule_set::get_limit makes for one
// request descriptor, level by level, with how each level matched, where and why it stopped, and the nearest
// rules that did not match with the reason for each.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ratelimit/config/rule_set.hpp"

namespace sluice::ratelimit::config {

std::string_view matched_by_name(matched_by how);  // "exact", "wildcard", "value_regex", "key_only"

struct explained_level {
  const descriptor_node* node = nullptr;
  matched_by how = matched_by::exact;
};

struct near_miss {
  const descriptor_node* node = nullptr;
  std::size_t level = 0;  // the request entry (0-based) it was compared with
  std::string why;
};

struct explanation {
  std::vector<explained_level> path;      // the levels that matched, in order
  const descriptor_node* rule = nullptr;  // the node whose limits apply (get_limit's), or null
  std::string outcome;                    // what the walk found, in a sentence
  std::vector<near_miss> candidates;      // nearest first
};

// The walk of `entries` under `domain` (a rule_set's domain node).
explanation explain_match(const descriptor_node& domain, std::span<const entry> entries,
                          std::size_t max_candidates = 8);

}  // namespace sluice::ratelimit::config
