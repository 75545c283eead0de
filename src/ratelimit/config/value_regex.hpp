#pragma once
// `value_regex` rules (docs/concepts/rules.md#regular-expressions-on-values-value_regex): the patterns of one
// key's value_regex rules at one level, compiled together into one RE2 set, so that a value is tried against
// all of them in one linear-time pass however many there are. A pattern must match the whole value.

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace sluice::ratelimit::config {

class value_regex_set {
 public:
  // Patterns longer than this are refused (RE2's own memory bound applies too).
  static constexpr std::size_t max_pattern_bytes = 1024;

  // Null and the reason when a pattern is not valid RE2 or too long; `patterns` in file order.
  static std::shared_ptr<const value_regex_set> build(std::span<const std::string> patterns,
                                                      std::string& error);
  // Why this one pattern cannot be a value_regex ("" when it can): RE2's message, or its length.
  static std::string check(const std::string& pattern);

  value_regex_set(const value_regex_set&) = delete;
  value_regex_set& operator=(const value_regex_set&) = delete;
  ~value_regex_set();

  // The first pattern in file order that matches the whole value, or -1.
  int first_match(std::string_view value) const;

 private:
  struct impl;
  explicit value_regex_set(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

struct descriptor_node;

// For the rule loader; both throw config_error. A value_regex rule: no `value` beside it, a pattern that
// compiles and stays under the bound.
void check_value_regex(const descriptor_node& node, bool has_value, const std::string& parent_key);
// The node's value_regex children indexed per key, each key's patterns in file order as one set.
void compile_value_regexes(descriptor_node& parent);

}  // namespace sluice::ratelimit::config
