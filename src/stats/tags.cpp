#include "stats/tags.hpp"

#include <algorithm>

namespace sluice::stats {

bool takes_extra_tags(std::string_view name) {
  return name.starts_with("ratelimit");
}

std::string sanitize_tag_value(std::string_view value) {
  std::string out(value);
  std::ranges::replace_if(
      out, [](char c) { return c == '.' || c == ':' || c == '|'; }, '_');
  return out;
}

std::string statsd_tagged_name(std::string_view name, const tag_list& tags) {
  std::string out(name);
  if (!takes_extra_tags(name)) return out;
  for (const auto& [key, value] : tags) {
    if (key.empty() || value.empty()) continue;
    out += ".__";
    out += key;
    out += '=';
    out += sanitize_tag_value(value);
  }
  return out;
}

}  // namespace sluice::stats
