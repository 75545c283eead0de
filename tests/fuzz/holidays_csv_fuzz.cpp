// libFuzzer: arbitrary bytes as the holidays CSV file (HOLIDAYS_CSV). Checks: no crash, no leak, no
// exception; a refused file yields no holidays and an error "line N: ..." with N within the file (or one of
// the whole-file errors); an accepted one has at least one holiday, Y-m-d dates, no control characters in
// names, and written back as CSV with every field quoted (by the harness) parses to the same list.
//
// Build and run: scripts/fuzz holidays_csv [seconds]

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/strings.hpp"
#include "holidays/holiday_csv.hpp"

namespace {

using sluice::holidays::holiday;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string csv_field(const std::optional<std::string>& value) {
  if (!value) return {};
  std::string out = "\"";
  for (char c : *value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void check_error(std::string_view text, const std::string& error) {
  check(!error.empty());
  if (!error.starts_with("line ")) {
    check(error == "the file is empty (expected a header such as name,date)" ||
          error == "the file has a header but no holidays");
    return;
  }
  std::size_t line = 0;
  const auto colon = error.find(':');
  check(colon != std::string::npos && sluice::core::parse_unsigned(error.substr(5, colon - 5), line));
  // Line ends are LF, CRLF or a lone CR.
  std::size_t lines = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++lines;
  }
  check(line >= 1 && line <= lines);
}

bool is_date(const std::string& d) {
  return d.size() == 10 && d[4] == '-' && d[7] == '-' &&
         std::all_of(d.begin(), d.end(), [](char c) { return c == '-' || (c >= '0' && c <= '9'); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = sluice::holidays::parse_holiday_csv(text);
  if (!parsed.error.empty()) {
    check(parsed.holidays.empty());
    check_error(text, parsed.error);
    return 0;
  }
  check(!parsed.holidays.empty());
  std::string written = "date,name\r\n";
  for (const holiday& h : parsed.holidays) {
    check(!h.date || is_date(*h.date));
    check(!h.name || std::none_of(h.name->begin(), h.name->end(),
                                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }));
    written += csv_field(h.date) + "," + csv_field(h.name) + "\r\n";
  }
  const auto again = sluice::holidays::parse_holiday_csv(written);
  check(again.error.empty() && again.holidays.size() == parsed.holidays.size());
  for (std::size_t i = 0; i < parsed.holidays.size(); ++i) {
    check(again.holidays[i].name == parsed.holidays[i].name &&
          again.holidays[i].date == parsed.holidays[i].date);
  }
  return 0;
}
