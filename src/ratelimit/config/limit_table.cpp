#include "ratelimit/config/limit_table.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <functional>

#include "core/counted.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::config {

namespace {

std::uint32_t hash_of(std::string_view value) {
  const std::size_t h = std::hash<std::string_view>{}(value);
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

// "<what> 'text'", the text cut short when long (a message names a bad field, it does not repeat a line).
std::string quoted(std::string_view text) {
  constexpr std::size_t shown = 64;
  return text.size() <= shown ? core::cat("'", text, "'") : core::cat("'", text.substr(0, shown), "...'");
}

std::optional<table_row> parse_row(std::string_view count, std::string_view unit_text, std::string& error) {
  table_row row;
  if (core::iequals(count, "unlimited")) {
    if (!unit_text.empty()) {
      error = core::cat("an unlimited row has no unit (found ", quoted(unit_text), ")");
      return std::nullopt;
    }
    row.unlimited = true;
    return row;
  }
  const auto* end = count.data() + count.size();
  auto [ptr, ec] = std::from_chars(count.data(), end, row.requests_per_unit);
  if (count.empty() || ec != std::errc{} || ptr != end) {
    error = core::cat("requests_per_unit ", quoted(count),
                      " is not a whole number from 0 to 4294967295 or 'unlimited'");
    return std::nullopt;
  }
  if (!unit_text.empty()) {
    auto parsed = parse_unit(unit_text);
    if (!parsed) {
      error =
          core::cat("unknown unit ", quoted(unit_text), " (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)");
      return std::nullopt;
    }
    row.unit = *parsed;
  }
  return row;
}

// One CSV line split into fields (RFC 4180 quoting, within the line). False with `error` set when a quote is
// not closed or text follows a closing quote.
bool split_fields(std::string_view line, std::vector<std::string>& fields, std::string& error) {
  fields.clear();
  std::size_t i = 0;
  while (true) {
    std::string field;
    // Spaces before a quote are not part of the field.
    std::size_t start = i;
    while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) ++start;
    if (start < line.size() && line[start] == '"') {
      i = start + 1;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        field += line[i++];
      }
      if (!closed) {
        error = "a quoted field is not closed on its line";
        return false;
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != ',') {
        error = "text after a quoted field's closing quote";
        return false;
      }
    } else {
      const std::size_t comma = line.find(',', i);
      const std::size_t end = comma == std::string_view::npos ? line.size() : comma;
      field = std::string(core::trim_space(line.substr(i, end - i)));
      if (field.find('"') != std::string::npos) {
        error = "a quote inside an unquoted field (quote the whole field and double the quote)";
        return false;
      }
      i = end;
    }
    fields.push_back(std::move(field));
    if (i >= line.size()) return true;
    ++i;  // the comma
  }
}

}  // namespace

bool is_table_name(std::string_view name) {
  return !name.empty() && !name.starts_with('.') && std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

std::optional<table_row> parse_table_limit(std::string_view text, std::string& error) {
  text = core::trim_space(text);
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return parse_row(text, "", error);
  const auto unit_text = core::trim_space(text.substr(slash + 1));
  if (unit_text.empty()) {
    error = core::cat(quoted(text), " names no unit after '/'");
    return std::nullopt;
  }
  return parse_row(core::trim_space(text.substr(0, slash)), unit_text, error);
}

std::size_t limit_table::probe(std::string_view value, std::uint32_t hash) const {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const auto& s = slots_[i];
    if (s.length == empty) return i;
    if (s.hash == hash && std::string_view(values_).substr(s.offset, s.length) == value) return i;
  }
}

void limit_table::reserve(std::size_t rows) {
  // At most 70 % full: short probes, and an empty slot always ends one.
  slots_.assign(std::bit_ceil(std::max<std::size_t>(8, rows * 10 / 7 + 1)), slot{});
}

const table_row* limit_table::find(std::string_view value) const {
  if (slots_.empty()) return nullptr;
  const auto& s = slots_[probe(value, hash_of(value))];
  return s.length == empty ? nullptr : &s.row;
}

limit_table limit_table::parse(std::string_view csv, std::size_t max_rows) {
  limit_table table;
  // Sized once from the lines (no rehash while loading), the values' buffer from the file.
  const auto lines = static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')) + 1;
  table.reserve(std::min(lines, max_rows + 1));
  table.values_.reserve(csv.size());
  std::vector<std::uint32_t> line_of(table.slots_.size());  // each slot's line, for a duplicate's message
  std::vector<std::string> quoted_fields;
  std::vector<std::string_view> fields;
  std::string error;
  bool header_seen = false;
  bool has_unit = false;
  std::size_t line_number = 0;
  auto fail = [&](std::string message) { throw table_error{line_number, std::move(message)}; };
  while (!csv.empty()) {
    ++line_number;
    const auto newline = csv.find('\n');
    std::string_view line = csv.substr(0, newline);
    csv.remove_prefix(newline == std::string_view::npos ? csv.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > max_line_bytes) fail(core::cat("longer than ", max_line_bytes, " bytes"));
    if (core::trim_space(line).empty()) continue;
    fields.clear();
    if (line.find('"') == std::string_view::npos) {
      // Most lines: fields are views of the line.
      for (std::size_t from = 0;;) {
        const auto comma = line.find(',', from);
        fields.push_back(
            core::trim_space(line.substr(from, comma == std::string_view::npos ? line.npos : comma - from)));
        if (comma == std::string_view::npos) break;
        from = comma + 1;
      }
    } else {
      if (!split_fields(line, quoted_fields, error)) fail(error);
      fields.assign(quoted_fields.begin(), quoted_fields.end());
    }
    if (!header_seen) {
      header_seen = true;
      has_unit = fields.size() == 3 && core::iequals(fields[2], "unit");
      const bool ok = (fields.size() == 2 || has_unit) && core::iequals(fields[0], "value") &&
                      core::iequals(fields[1], "requests_per_unit");
      if (!ok) fail(core::cat("the header must be value,requests_per_unit[,unit], not ", quoted(line)));
      continue;
    }
    if (fields.size() != 2 && !(has_unit && fields.size() == 3)) {
      // More fields than the header's may be a comma inside a value; fewer never is.
      const bool more = fields.size() > (has_unit ? 3u : 2u);
      fail(core::cat(core::counted(fields.size(), "field", "fields"), " where the header has ",
                     has_unit ? "2 or 3" : "2", more ? " (quote a value that holds a comma)" : ""));
    }
    const std::string_view value = fields[0];
    if (value.empty()) fail("the value is empty");
    auto row = parse_row(fields[1], fields.size() == 3 ? fields[2] : std::string_view(), error);
    if (!row) fail(error);
    if (table.rows_ == max_rows) fail(core::cat("more than ", max_rows, " rows (LIMIT_TABLES_MAX_ROWS)"));
    if (table.values_.size() + value.size() > UINT32_MAX) fail("the values take more than 4 GiB");
    const std::uint32_t hash = hash_of(value);
    const std::size_t at = table.probe(value, hash);
    if (table.slots_[at].length != empty)
      fail(core::cat("the value ", quoted(value), " is on line ", line_of[at], " already"));
    table.slots_[at] = slot{static_cast<std::uint32_t>(table.values_.size()),
                            static_cast<std::uint32_t>(value.size()), hash, *row};
    line_of[at] = static_cast<std::uint32_t>(line_number);
    table.values_ += value;
    ++table.rows_;
  }
  if (!header_seen) {
    line_number = 0;
    fail("no header (value,requests_per_unit[,unit])");
  }
  table.values_.shrink_to_fit();
  return table;
}

}  // namespace sluice::ratelimit::config
