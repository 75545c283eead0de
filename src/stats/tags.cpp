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

std::pair<std::string, tag_list> split_own_tags(std::string_view name) {
  std::pair<std::string, tag_list> out;
  for (auto at = name.find(".__"); at != std::string_view::npos; at = name.find(".__")) {
    const auto rest = name.substr(at + 3);
    const auto end = std::min(rest.find(".__"), rest.size());
    const auto tag = rest.substr(0, end);
    const auto equals = tag.find('=');
    if (equals == std::string_view::npos) break;  // not a tag: the rest stays in the name
    out.first.append(name.substr(0, at));
    out.second.emplace_back(tag.substr(0, equals), tag.substr(equals + 1));
    name = rest.substr(end);
  }
  out.first.append(name);
  return out;
}

std::string statsd_tagged_name(std::string_view name, const tag_list& extra_tags) {
  if (name.find(".__") == std::string_view::npos && !takes_extra_tags(name)) return std::string(name);
  auto [out, tags] = split_own_tags(name);
  if (takes_extra_tags(name)) {
    for (const auto& [key, value] : extra_tags) {
      if (!key.empty() && !value.empty()) tags.emplace_back(key, sanitize_tag_value(value));
    }
  }
  std::ranges::stable_sort(tags, {}, &tag_list::value_type::first);
  for (const auto& [key, value] : tags) {
    out += ".__";
    out += key;
    out += '=';
    out += value;
  }
  return out;
}

}  // namespace sluice::stats
