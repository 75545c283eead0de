#include <span>
#include <string>
#include <string_view>

#include "ratelimit/config/rule_set.hpp"

namespace sluice::ratelimit::config {

bool wildcard_match(std::span<const std::string> parts, std::string_view text) {
  if (parts.size() == 1) return text == parts[0];
  const std::string& first = parts.front();
  const std::string& last = parts.back();
  std::size_t fixed = 0;
  for (const auto& p : parts) fixed += p.size();
  if (text.size() < fixed || !text.starts_with(first) || !text.ends_with(last)) return false;
  // The middle parts must appear in order, leftmost first, between the prefix and the suffix.
  std::string_view middle = text.substr(first.size(), text.size() - first.size() - last.size());
  for (std::size_t i = 1; i + 1 < parts.size(); ++i) {
    auto pos = middle.find(parts[i]);
    if (pos == std::string_view::npos) return false;
    middle.remove_prefix(pos + parts[i].size());
  }
  return true;
}

}  // namespace sluice::ratelimit::config
