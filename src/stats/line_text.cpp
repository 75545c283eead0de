#include "stats/line_text.hpp"

#include <charconv>

namespace sluice::stats {

void append_fixed(std::string& out, double v, int decimals) {
  char buf[400];  // the largest double in fixed notation has 309 digits
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

void append_shortest(std::string& out, double v) {
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

std::vector<std::string_view> split_lines(std::string_view lines, std::size_t max_bytes) {
  std::vector<std::string_view> chunks;
  std::size_t start = 0;
  while (start < lines.size()) {
    std::size_t end = start;
    // Take whole lines while they fit; always at least one.
    while (end < lines.size()) {
      auto nl = lines.find('\n', end);
      std::size_t next = nl == std::string_view::npos ? lines.size() : nl + 1;
      if (end > start && next - start > max_bytes) break;
      end = next;
    }
    chunks.push_back(lines.substr(start, end - start));
    start = end;
  }
  return chunks;
}

}  // namespace sluice::stats
