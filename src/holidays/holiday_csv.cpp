#include "holidays/holiday_csv.hpp"

#include <chrono>

#include "core/counted.hpp"
#include "core/strings.hpp"

namespace sluice::holidays {

namespace {

struct csv_record {
  std::vector<std::string> fields;
  std::size_t line = 0;  // where the record starts
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits RFC 4180 records; false with `error` set on a malformed quote.
class record_reader {
 public:
  explicit record_reader(std::string_view text) : text_(text) {}

  bool next(csv_record& record, std::string& error) {
    record = {};
    if (pos_ >= text_.size()) return false;
    record.line = line_;
    while (true) {
      std::string field;
      if (!read_field(field, error)) return false;
      record.fields.push_back(std::move(field));
      if (pos_ >= text_.size()) return true;
      char c = text_[pos_++];
      if (c == ',') continue;
      if (c == '\r' && pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
      ++line_;
      return true;
    }
  }

 private:
  bool read_field(std::string& field, std::string& error) {
    std::size_t start = pos_;
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '"') return read_quoted(field, error);
    pos_ = start;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' && text_[pos_] != '\r') {
      if (text_[pos_] == '"') {
        error = core::cat("line ", line_, ": a quote inside an unquoted field (quote the whole field)");
        return false;
      }
      ++pos_;
    }
    field = trim(text_.substr(start, pos_ - start));
    return true;
  }

  bool read_quoted(std::string& field, std::string& error) {
    std::size_t opened_on = line_;
    ++pos_;  // the opening quote
    while (true) {
      if (pos_ >= text_.size()) {
        error = core::cat("line ", opened_on, ": a quoted field is not closed");
        return false;
      }
      char c = text_[pos_++];
      if (c == '"') {
        if (pos_ < text_.size() && text_[pos_] == '"') {
          field.push_back('"');
          ++pos_;
          continue;
        }
        break;
      }
      if (c == '\n') ++line_;
      field.push_back(c);
    }
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
    if (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' && text_[pos_] != '\r') {
      error = core::cat("line ", line_, ": unexpected text after a closing quote");
      return false;
    }
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

bool is_calendar_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  unsigned y = 0, m = 0, d = 0;
  if (!core::parse_unsigned(s.substr(0, 4), y) || !core::parse_unsigned(s.substr(5, 2), m) ||
      !core::parse_unsigned(s.substr(8, 2), d))
    return false;
  return std::chrono::year_month_day(std::chrono::year(static_cast<int>(y)), std::chrono::month(m),
                                     std::chrono::day(d))
      .ok();
}

// The first line with a byte that is not well-formed UTF-8, 0 when the text is valid.
std::size_t invalid_utf8_line(std::string_view text) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t n = core::utf8_sequence(text, i);
    if (n == 0) return line;
    // Line ends as the record reader counts them: LF, CRLF or a lone CR.
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++line;
    i += n;
  }
  return 0;
}

// A character some format cannot carry: C0 and C1 controls (XML 1.0 and iCalendar TEXT have no place for
// them) and the noncharacters U+FFFE and U+FFFF (not XML characters). The text is valid UTF-8 here.
bool has_unservable_character(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    if (c < 0x20 || c == 0x7f || (c == 0xC2 && next >= 0x80 && next <= 0x9F)) return true;
    if (c == 0xEF && next == 0xBF && i + 2 < s.size() && static_cast<unsigned char>(s[i + 2]) >= 0xBE)
      return true;
  }
  return false;
}

bool is_blank(const csv_record& record) {
  return record.fields.size() == 1 && record.fields[0].empty();
}

std::optional<std::string> null_if_empty(std::string& s) {
  if (s.empty()) return std::nullopt;
  return std::move(s);
}

}  // namespace

holiday_csv parse_holiday_csv(std::string_view text) {
  holiday_csv out;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  if (std::size_t line = invalid_utf8_line(text)) {
    out.error = core::cat("line ", line, ": not valid UTF-8");
    return out;
  }
  record_reader reader(text);
  csv_record header;
  bool have_header = false;
  while ((have_header = reader.next(header, out.error)) && is_blank(header)) {
  }
  if (!have_header) {
    if (out.error.empty()) out.error = "the file is empty (expected a header such as name,date)";
    return out;
  }
  std::optional<std::size_t> name_at, date_at;
  for (std::size_t i = 0; i < header.fields.size(); ++i) {
    std::string column = core::ascii_lower(header.fields[i]);
    auto* at = column == "date" ? &date_at : column == "name" || column == "holiday" ? &name_at : nullptr;
    if (at == nullptr) continue;  // another column (e.g. a year): ignored
    if (*at) {
      out.error = core::cat("line ", header.line, ": two ", at == &date_at ? "date" : "name", " columns");
      return out;
    }
    *at = i;
  }
  if (!name_at || !date_at) {
    std::string columns;
    for (const auto& field : header.fields) columns += (columns.empty() ? "" : ",") + field;
    out.error = core::cat("line ", header.line,
                          ": the header needs a name (or holiday) and a date column, got '", columns, "'");
    return out;
  }
  csv_record record;
  while (reader.next(record, out.error)) {
    if (is_blank(record)) continue;
    if (record.fields.size() != header.fields.size()) {
      out.error =
          core::cat("line ", record.line, ": ", core::counted(record.fields.size(), "field", "fields"),
                    ", the header has ", header.fields.size());
      break;
    }
    std::string& name = record.fields[*name_at];
    std::string& date = record.fields[*date_at];
    if (!date.empty() && !is_calendar_date(date)) {
      out.error = core::cat("line ", record.line, ": date '", date, "' is not a Y-m-d calendar date");
      break;
    }
    if (has_unservable_character(name)) {
      out.error =
          core::cat("line ", record.line,
                    ": the name contains a control character (or U+FFFE, U+FFFF), which json, xml and ics "
                    "cannot all carry");
      break;
    }
    out.holidays.push_back({null_if_empty(name), null_if_empty(date)});
  }
  if (out.error.empty() && out.holidays.empty()) out.error = "the file has a header but no holidays";
  if (!out.error.empty()) out.holidays.clear();
  return out;
}

}  // namespace sluice::holidays
