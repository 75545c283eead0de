#include "ratelimit/config/value_regex.hpp"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <vector>

#include "core/strings.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/config/yaml_fields.hpp"

namespace sluice::ratelimit::config {

namespace {

RE2::Options options() {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(64 << 20);  // a set of a thousand patterns fits; more memory is refused, not used
  return o;
}

// A pattern as a message quotes it: a long one cut at 64 bytes, so that "longer than 1024 bytes" does not
// repeat all of it.
std::string shown_pattern(std::string_view pattern) {
  constexpr std::size_t shown = 64;
  if (pattern.size() <= shown) return std::string(pattern);
  return core::cat(pattern.substr(0, shown), "\u2026");
}

}  // namespace

struct value_regex_set::impl {
  RE2::Set set{options(), RE2::ANCHOR_BOTH};
};

value_regex_set::value_regex_set(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
value_regex_set::~value_regex_set() = default;

std::string value_regex_set::check(const std::string& pattern) {
  if (pattern.size() > max_pattern_bytes)
    return core::cat("longer than ", max_pattern_bytes, " bytes (", pattern.size(), ")");
  RE2 re(pattern, options());
  if (!re.ok()) return re.error();
  return {};
}

std::shared_ptr<const value_regex_set> value_regex_set::build(std::span<const std::string> patterns,
                                                              std::string& error) {
  auto i = std::make_unique<impl>();
  for (const auto& p : patterns) {
    if (auto problem = check(p); !problem.empty()) {
      error = core::cat("value_regex '", shown_pattern(p), "': ", problem);
      return nullptr;
    }
    std::string why;
    if (i->set.Add(p, &why) < 0) {
      error = core::cat("value_regex '", shown_pattern(p), "': ", why);
      return nullptr;
    }
  }
  if (!i->set.Compile()) {
    error = core::cat("the ", patterns.size(),
                      " value_regex patterns of one level need more memory than RE2 allows");
    return nullptr;
  }
  return std::shared_ptr<const value_regex_set>(new value_regex_set(std::move(i)));
}

int value_regex_set::first_match(std::string_view value) const {
  thread_local std::vector<int> matched;  // no allocation per decision once it has grown
  matched.clear();
  if (!impl_->set.Match(value, &matched) || matched.empty()) return -1;
  return *std::min_element(matched.begin(), matched.end());
}

// `value_regex` and `value` exclude each other; the pattern must compile (RE2) and stay under the size bound.
void check_value_regex(const descriptor_node& node, bool has_value, const std::string& parent_key) {
  const auto where = core::cat("'", parent_key, ".", node.key, "'");
  if (has_value)
    throw config_error{core::cat("descriptor ", where, " has both value and value_regex: give one")};
  if (node.value_regex.empty()) throw config_error{core::cat("descriptor ", where, ": value_regex is empty")};
  if (auto problem = value_regex_set::check(node.value_regex); !problem.empty()) {
    throw config_error{
        core::cat("descriptor ", where, ": value_regex '", shown_pattern(node.value_regex), "': ", problem)};
  }
}

// Per key, the level's patterns in file order as one set (once a list is read; again when a merged domain's
// next file adds more).
void compile_value_regexes(descriptor_node& parent) {
  parent.regex_by_key.clear();
  for (const auto& child : parent.regex_children)
    parent.regex_by_key[child->key].nodes.push_back(child.get());
  for (auto& [key, rules] : parent.regex_by_key) {
    std::vector<std::string> patterns;
    for (const auto* node : rules.nodes) patterns.push_back(node->value_regex);
    std::string error;
    rules.set = value_regex_set::build(patterns, error);
    if (!rules.set) throw config_error{core::cat("descriptors '", parent.stats_key, ".", key, "': ", error)};
  }
}

}  // namespace sluice::ratelimit::config
