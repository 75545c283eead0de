#pragma once
// A limit table (docs/guides/tenant-tables.md): per descriptor value, the limit that replaces its rule's
// `rate_limit`. Parsed from CSV (LIMIT_TABLES_DIR/<table>.csv) or from one Redis hash field at a time, and
// immutable once built: a reload builds a new table and swaps it in, so lookups never lock.
//
// The CSV: a header `value,requests_per_unit[,unit]`, then one row per value. requests_per_unit is a whole
// number (0 refuses every request) or `unlimited`; the unit (SECOND ... YEAR, any case) may be left out, and
// the rule's unit applies. Fields may be quoted as RFC 4180 says ("a,b" and "" for a quote); spaces around an
// unquoted field are ignored. Blank lines are skipped.
//
// Memory: the values in one buffer and an open-addressing index of 24-byte slots at most 70 % full, so a row
// costs 34 to 69 bytes beyond its value's bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/config/unit.hpp"

namespace sluice::ratelimit::config {

// One row's limit. unit::unknown: the rule's unit.
struct table_row {
  std::uint32_t requests_per_unit = 0;
  config::unit unit = unit::unknown;
  bool unlimited = false;
  bool operator==(const table_row&) const = default;
};

// What is wrong with a table: the line (1-based; 0 for the whole file) and why.
struct table_error {
  std::size_t line = 0;
  std::string message;
};

// Whether `name` may name a table (`limits_from`, <name>.csv, a stats level): letters, digits, '_', '-' and
// '.', not first.
bool is_table_name(std::string_view name);

// The Redis hash a table lives in (LIMIT_TABLES_REDIS): ratelimit_limits:<table>.
inline std::string redis_table_key(std::string_view table) {
  return std::string("ratelimit_limits:").append(table);
}

// "100", "100/MINUTE", "unlimited" (a Redis table's field): the row, or nullopt with `error` saying why.
std::optional<table_row> parse_table_limit(std::string_view text, std::string& error);

class limit_table {
 public:
  static constexpr std::size_t max_line_bytes = 8192;

  // Throws table_error: a bad header or row, a value given twice, more than `max_rows` rows.
  static limit_table parse(std::string_view csv, std::size_t max_rows);

  const table_row* find(std::string_view value) const;
  std::size_t size() const { return rows_; }
  // What the table holds in memory: its values and its index.
  std::size_t memory_bytes() const { return values_.capacity() + slots_.capacity() * sizeof(slot); }
  // Every row, in no particular order (tests, the fuzz harness's canonical form).
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (const auto& s : slots_)
      if (s.length != empty) visit(std::string_view(values_).substr(s.offset, s.length), s.row);
  }

 private:
  static constexpr std::uint32_t empty = UINT32_MAX;
  struct slot {
    std::uint32_t offset = 0;
    std::uint32_t length = empty;
    std::uint32_t hash = 0;
    table_row row;
  };
  // Where `value` is, or the empty slot it would go in.
  std::size_t probe(std::string_view value, std::uint32_t hash) const;
  void reserve(std::size_t rows);

  std::string values_;
  std::vector<slot> slots_;  // a power of two long (or empty)
  std::size_t rows_ = 0;
  friend class table_builder;
};

}  // namespace sluice::ratelimit::config
