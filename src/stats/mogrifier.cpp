#include "stats/mogrifier.hpp"

#include <cctype>

#include "core/env.hpp"
#include "core/strings.hpp"

namespace sluice::stats {

namespace {

std::string variable(const mogrifier_settings& m, std::string_view suffix) {
  return core::cat("DOG_STATSD_MOGRIFIER_", m.name, "_", suffix);
}

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

}  // namespace

mogrifier_list::mogrifier_list(const std::vector<mogrifier_settings>& settings) {
  for (const auto& m : settings) {
    if (m.pattern.empty()) {
      throw core::settings_error(
          core::cat("no PATTERN specified for mogrifier ", m.name, " (set ", variable(m, "PATTERN"), ")"));
    }
    entry e;
    try {
      e.pattern = boost::regex(m.pattern, boost::regex::perl);
    } catch (const boost::regex_error& error) {
      throw core::settings_error(core::cat("failed to compile pattern for mogrifier ", m.name, ": ",
                                           m.pattern, ": ", error.what(), " (", variable(m, "PATTERN"), ")"));
    }
    if (m.new_name.empty()) {
      throw core::settings_error(
          core::cat("no NAME specified for mogrifier ", m.name, " (set ", variable(m, "NAME"), ")"));
    }
    for (const auto& [key, value] : m.tags) {
      if (key.empty()) {
        throw core::settings_error(core::cat("no key specified for tag ", key, " for mogrifier ", m.name,
                                             " (", variable(m, "TAGS"), ")"));
      }
      if (value.empty()) {
        throw core::settings_error(core::cat("no value specified for tag ", key, " for mogrifier ", m.name,
                                             " (", variable(m, "TAGS"), ")"));
      }
    }
    e.name = m.new_name;
    e.tags = m.tags;
    entries_.push_back(std::move(e));
  }
}

std::optional<mogrified> mogrifier_list::apply(const std::string& name) const {
  boost::smatch groups;
  for (const auto& e : entries_) {
    if (!boost::regex_search(name, groups, e.pattern)) continue;
    mogrified out{expand_groups(e.name, groups), {}};
    for (const auto& [key, value] : e.tags)
      out.tags.push_back(core::cat(key, ":", expand_groups(value, groups)));
    return out;
  }
  return std::nullopt;
}

std::string expand_groups(std::string_view text, const boost::smatch& groups) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 >= text.size() || !is_digit(text[i + 1])) {
      out.push_back(text[i]);
      continue;
    }
    std::size_t end = i + 1, group = 0;
    // Like upstream's `\$\d+`, every digit belongs to the group number.
    for (; end < text.size() && is_digit(text[end]); ++end) {
      group = std::min<std::size_t>(group * 10 + static_cast<std::size_t>(text[end] - '0'), 1'000'000);
    }
    if (group < groups.size()) out += groups.str(static_cast<int>(group));
    i = end - 1;
  }
  return out;
}

}  // namespace sluice::stats
