#include "core/setting.hpp"

#include <algorithm>
#include <stdexcept>

namespace sluice::core {

setting_family::setting_family(std::span<const setting> first, std::string_view first_prefix,
                               std::vector<variant> others) {
  all_.assign(first.begin(), first.end());
  for (const auto& v : others) {
    for (const auto& s : first) {
      if (!s.name.starts_with(first_prefix))
        throw std::logic_error(std::string(s.name) + " lacks its prefix");
      const auto& name =
          text_.emplace_back(std::string(v.prefix) + std::string(s.name.substr(first_prefix.size())));
      const auto& meaning = text_.emplace_back(std::string(v.note) + std::string(s.meaning));
      std::string_view def = v.every_default.empty() ? s.default_value : v.every_default;
      for (const auto& [suffix, own] : v.defaults)
        if (s.name.substr(first_prefix.size()) == suffix) def = own;
      all_.push_back({name, s.kind, def, meaning});
    }
  }
}

const setting& setting_family::at(std::string_view prefix, std::string_view suffix) const {
  for (const auto& s : all_) {
    if (s.name.size() == prefix.size() + suffix.size() && s.name.starts_with(prefix) &&
        s.name.ends_with(suffix))
      return s;
  }
  throw std::logic_error(std::string(prefix) + std::string(suffix) + " is not declared");
}

std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t most) {
  const std::size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > most) return most + 1;
  // Optimal string alignment: three rows of the table.
  std::vector<std::size_t> before(m + 1), last(m + 1), row(m + 1);
  for (std::size_t j = 0; j <= m; ++j) last[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    row[0] = i;
    std::size_t best = row[0];
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
      best = std::min(best, row[j]);
    }
    if (best > most) return most + 1;
    before.swap(last);
    last.swap(row);
  }
  return std::min(last[m], most + 1);
}

}  // namespace sluice::core
