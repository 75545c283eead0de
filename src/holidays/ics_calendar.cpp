#include "holidays/ics_calendar.hpp"

#include <chrono>
#include <cstdio>
#include <set>

#include "core/strings.hpp"

namespace sluice::holidays {

namespace {

constexpr std::size_t max_line_octets = 75;  // RFC 5545 §3.1, without the CRLF

// Writes one content line, folded: a continuation line starts with a space, which counts toward its 75.
void append_line(std::string& out, std::string_view line) {
  std::size_t limit = max_line_octets;
  while (line.size() > limit) {
    std::size_t cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // not mid-character
    out.append(line.substr(0, cut));
    out.append("\r\n ");
    line.remove_prefix(cut);
    limit = max_line_octets - 1;
  }
  out.append(line);
  out.append("\r\n");
}

// TEXT value escaping (RFC 5545 §3.3.11); names carry no control characters (the CSV reader refuses them).
std::string escape_text(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == ';' || c == ',') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// "2026-01-01" -> "20260101"
std::string basic_date(std::string_view ymd) {
  return core::cat(ymd.substr(0, 4), ymd.substr(5, 2), ymd.substr(8, 2));
}

std::string basic_date(std::chrono::sys_days day) {
  std::chrono::year_month_day ymd(day);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d%02u%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

std::chrono::sys_days parse_day(std::string_view ymd) {
  auto number = [&](std::size_t at, std::size_t len) {
    unsigned v = 0;
    core::parse_unsigned(ymd.substr(at, len), v);
    return v;
  };
  return std::chrono::year_month_day(std::chrono::year(static_cast<int>(number(0, 4))),
                                     std::chrono::month(number(5, 2)), std::chrono::day(number(8, 2)));
}

std::string utc_stamp(std::int64_t unix_seconds) {
  std::chrono::sys_seconds t{std::chrono::seconds(unix_seconds)};
  auto day = std::chrono::floor<std::chrono::days>(t);
  std::chrono::hh_mm_ss time(t - day);
  char buf[16];
  std::snprintf(buf, sizeof buf, "T%02d%02d%02dZ", static_cast<int>(time.hours().count()),
                static_cast<int>(time.minutes().count()), static_cast<int>(time.seconds().count()));
  return basic_date(day) + buf;
}

// "New Year’s Day" -> "new-years-day": letters and digits, apostrophes dropped, anything else one dash.
std::string slug(const std::optional<std::string>& name) {
  std::string out;
  std::string_view s = name ? std::string_view(*name) : "holiday";
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\'' || s.substr(i).starts_with("\xE2\x80\x99")) {
      if (c != '\'') i += 2;
      continue;
    }
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
      alnum = true;
    }
    if (alnum) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "holiday" : out;
}

}  // namespace

std::string ics_calendar(const std::vector<holiday>& holidays, std::int64_t stamp) {
  std::string out;
  out.reserve(holidays.size() * 200 + 256);
  append_line(out, "BEGIN:VCALENDAR");
  append_line(out, "VERSION:2.0");
  append_line(out, "PRODID:-//Sluice//Holidays API 2.07//EN");
  append_line(out, "CALSCALE:GREGORIAN");
  append_line(out, "METHOD:PUBLISH");
  const std::string dtstamp = "DTSTAMP:" + utc_stamp(stamp);
  std::set<std::string> uids;
  for (const auto& h : holidays) {
    if (!h.date) continue;
    // Date and name make the UID; a repeated pair (a duplicated row) gets a counter, so UIDs stay unique.
    std::string base = core::cat(basic_date(*h.date), "-", slug(h.name));
    std::string uid = base;
    for (int n = 2; !uids.insert(uid).second; ++n) uid = core::cat(base, "-", n);
    append_line(out, "BEGIN:VEVENT");
    append_line(out, core::cat("UID:", uid, "@holidays.sluice"));
    append_line(out, dtstamp);
    append_line(out, core::cat("DTSTART;VALUE=DATE:", basic_date(*h.date)));
    append_line(out, core::cat("DTEND;VALUE=DATE:", basic_date(parse_day(*h.date) + std::chrono::days(1))));
    if (h.name) append_line(out, core::cat("SUMMARY:", escape_text(*h.name)));
    append_line(out, "TRANSP:TRANSPARENT");
    append_line(out, "END:VEVENT");
  }
  append_line(out, "END:VCALENDAR");
  return out;
}

}  // namespace sluice::holidays
