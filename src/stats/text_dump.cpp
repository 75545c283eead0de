#include "stats/text_dump.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/strings.hpp"

namespace sluice::stats {

std::string text_dump(store& s) {
  s.run_generators();
  std::vector<std::pair<std::string, std::string>> lines;
  s.for_each_counter(
      [&](const std::string& name, const counter& c) { lines.emplace_back(name, core::cat(c.value())); });
  s.for_each_gauge(
      [&](const std::string& name, const gauge& g) { lines.emplace_back(name, core::cat(g.value())); });
  s.for_each_timer([&](const std::string& name, timer& t) {
    lines.emplace_back(name, core::cat("count=", t.count(), " sum_ms=", t.sum_milliseconds()));
  });
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& [name, value] : lines) out += core::cat(name, ": ", value, "\n");
  return out;
}

}  // namespace sluice::stats
