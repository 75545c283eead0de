// libFuzzer: arbitrary bytes as a limit table file (LIMIT_TABLES_DIR/<table>.csv) and as a Redis table's
// field. Checks: no crash, no leak, no exception but table_error; a refused file names a line within it (or
// 0); an accepted table written back as CSV with every value quoted (by the harness) parses to the same rows;
// a field's limit written back as "<n>/<UNIT>" parses to the same limit.
//
// Build and run: scripts/fuzz limit_table [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/config/limit_table.hpp"

namespace {

using namespace sluice::ratelimit::config;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string quoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string limit_text(const table_row& row) {
  if (row.unlimited) return "unlimited";
  std::string out = std::to_string(row.requests_per_unit);
  if (row.unit != unit::unknown) out += "/" + std::string(unit_name(row.unit));
  return out;
}

void check_field(std::string_view text) {
  std::string why;
  const auto row = parse_table_limit(text, why);
  if (!row) {
    check(!why.empty());
    return;
  }
  const auto again = parse_table_limit(limit_text(*row), why);
  check(again && *again == *row);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_field(text.substr(0, 64));
  std::size_t lines = 1;
  for (char c : text) lines += c == '\n' ? 1 : 0;
  try {
    const auto table = limit_table::parse(text, 1000);
    std::string written = "value,requests_per_unit,unit\n";
    std::vector<std::pair<std::string, table_row>> rows;
    table.for_each([&](std::string_view value, const table_row& row) {
      check(!value.empty() && value.find('\n') == std::string_view::npos);
      const auto* found = table.find(value);
      check(found != nullptr && *found == row);
      rows.emplace_back(std::string(value), row);
      written += quoted(value) + "," + (row.unlimited ? "unlimited" : std::to_string(row.requests_per_unit)) +
                 "," + (row.unit == unit::unknown ? "" : std::string(unit_name(row.unit))) + "\n";
    });
    check(rows.size() == table.size());
    const auto again = limit_table::parse(written, 1000);
    check(again.size() == table.size());
    for (const auto& [value, row] : rows) check(again.find(value) != nullptr && *again.find(value) == row);
  } catch (const table_error& e) {
    check(!e.message.empty() && e.line <= lines);
  }
  return 0;
}
