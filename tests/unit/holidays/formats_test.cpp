// The json and xml envelopes and the iCalendar rendering, checked byte for byte where the layout matters.

#include <doctest/doctest.h>

#include <set>
#include <sstream>

#include "core/strings.hpp"
#include "holidays/envelope.hpp"
#include "holidays/ics_calendar.hpp"

namespace {

using namespace sluice::holidays;

const std::vector<holiday> two = {{"New Year's Day", "2012-01-02"}, {std::nullopt, std::nullopt}};

std::vector<std::string> ics_lines(const std::string& ics) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < ics.size()) {
    auto end = ics.find("\r\n", start);
    REQUIRE(end != std::string::npos);
    lines.push_back(ics.substr(start, end - start));
    start = end + 2;
  }
  return lines;
}

bool whole_utf8(std::string_view s) {
  for (std::size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = sluice::core::utf8_sequence(s, i)) == 0) return false;
  return true;
}

// RFC 5545 unfolding: a line that starts with a space continues the previous one.
std::vector<std::string> unfolded(const std::string& ics) {
  std::vector<std::string> out;
  for (auto& line : ics_lines(ics)) {
    if (!line.empty() && line[0] == ' ')
      out.back() += line.substr(1);
    else
      out.push_back(line);
  }
  return out;
}

}  // namespace

TEST_CASE("json envelope: the API's pretty printing, nulls, and an error's empty data") {
  meta m{161, 1384449847, 200, success_message};
  CHECK(json_document(m, json_data(two)) == R"({
  "meta":{
    "requests":161,
    "timestamp":1384449847,
    "status":200,
    "message":"Request successful",
    "method_id":1423,
    "version":2.07,
    "method":{

    }
  },
  "data":[
    {
      "name":"New Year's Day",
      "date":"2012-01-02"
    },
    {
      "name":null,
      "date":null
    }
  ]
})");
  meta error{-1, 1370802917, 511, "API key is required (?key=)"};
  CHECK(json_document(error, json_no_data).ends_with(R"j(    "message":"API key is required (?key=)",
    "method_id":1423,
    "version":2.07,
    "method":{

    }
  },
  "data":{

  }
})j"));
}

TEST_CASE("json envelope: names are escaped and UTF-8 is kept") {
  auto data = json_data({{"Say \"hi\" \\ New Year\xE2\x80\x99s", "2026-01-01"}});
  CHECK(data.find(R"("name":"Say \"hi\" \\ New Year)"
                  "\xE2\x80\x99"
                  R"(s")") != std::string::npos);
}

TEST_CASE("json envelope: U+2028 and U+2029 are escaped, as JSONP is JavaScript") {
  auto data =
      json_data({{"a\xE2\x80\xA8"
                  "b\xE2\x80\xA9"
                  "c\xE2\x80\x99"
                  "d",
                  "2026-01-01"}});
  CHECK(data.find(R"("name":"a\u2028b\u2029c)"
                  "\xE2\x80\x99"
                  R"(d")") != std::string::npos);
}

TEST_CASE("xml envelope: meta in the json order, one item per holiday, escaped text") {
  meta m{3, 1384449847, 200, success_message};
  CHECK(xml_document(m, xml_data({{"A & B <C> 'd' \"e\"", "2012-01-02"}, {std::nullopt, "2012-01-03"}})) ==
        R"(<?xml version="1.0" encoding="UTF-8"?>
<response>
  <meta>
    <requests>3</requests>
    <timestamp>1384449847</timestamp>
    <status>200</status>
    <message>Request successful</message>
    <method_id>1423</method_id>
    <version>2.07</version>
    <method></method>
  </meta>
  <data>
    <item>
      <name>A &amp; B &lt;C&gt; 'd' "e"</name>
      <date>2012-01-02</date>
    </item>
    <item>
      <name></name>
      <date>2012-01-03</date>
    </item>
  </data>
</response>
)");
  CHECK(xml_document({-1, 1, 511, "API key is required (?key=)"}, xml_no_data)
            .ends_with("<method></method>\n  </meta>\n  <data></data>\n</response>\n"));
}

TEST_CASE("ics: one all-day event per dated holiday, CRLF lines, a DTSTAMP in UTC") {
  std::string ics = ics_calendar({{"Additional Day", "2012-12-31"},
                                  {"No date", std::nullopt},
                                  {std::nullopt, "2016-02-28"},
                                  {"Leap", "2016-02-29"}},
                                 1795345730);  // 2026-11-22T11:08:50Z
  auto lines = ics_lines(ics);
  REQUIRE(lines.size() > 4);
  CHECK(lines.front() == "BEGIN:VCALENDAR");
  CHECK(lines[1] == "VERSION:2.0");
  CHECK(lines.back() == "END:VCALENDAR");
  std::ostringstream events;
  for (auto& l : lines) events << l << "\n";
  CHECK(events.str().find("BEGIN:VEVENT\n"
                          "UID:20121231-additional-day@holidays.sluice\n"
                          "DTSTAMP:20261122T110850Z\n"
                          "DTSTART;VALUE=DATE:20121231\n"
                          "DTEND;VALUE=DATE:20130101\n"
                          "SUMMARY:Additional Day\n"
                          "TRANSP:TRANSPARENT\n"
                          "END:VEVENT\n") != std::string::npos);
  CHECK(events.str().find("No date") == std::string::npos);  // no date, no event
  CHECK(events.str().find("UID:20160228-holiday@holidays.sluice\nDTSTAMP:20261122T110850Z\n"
                          "DTSTART;VALUE=DATE:20160228\nDTEND;VALUE=DATE:20160229\nTRANSP") !=
        std::string::npos);  // no name, no SUMMARY
  CHECK(events.str().find("DTEND;VALUE=DATE:20160301") != std::string::npos);
}

TEST_CASE("ics: UIDs are unique and stable; text is escaped; long lines fold between characters") {
  std::string long_name(80, 'x');
  for (int i = 0; i < 40; ++i) long_name += "\xC3\xA9";  // é, two octets
  std::vector<holiday> list = {{"New Year\xE2\x80\x99s Day", "2026-01-01"},
                               {"Additional Day", "2026-01-02"},
                               {"Additional Day", "2026-01-02"},
                               {"a,b;c\\d", "2026-01-05"},
                               {long_name, "2026-01-06"}};
  std::string ics = ics_calendar(list, 0);
  CHECK(ics == ics_calendar(list, 0));
  for (auto& line : ics_lines(ics)) {
    CHECK(line.size() <= 75);
    CHECK(whole_utf8(line));  // folded between characters, never inside one
  }
  std::set<std::string> uids;
  std::vector<std::string> summaries;
  for (auto& line : unfolded(ics)) {
    if (line.starts_with("UID:")) CHECK(uids.insert(line).second);
    if (line.starts_with("SUMMARY:")) summaries.push_back(line.substr(8));
  }
  CHECK(uids.count("UID:20260101-new-years-day@holidays.sluice") == 1);
  CHECK(uids.count("UID:20260102-additional-day@holidays.sluice") == 1);
  CHECK(uids.count("UID:20260102-additional-day-2@holidays.sluice") == 1);
  REQUIRE(summaries.size() == 5);
  CHECK(summaries[0] == "New Year\xE2\x80\x99s Day");
  CHECK(summaries[3] == "a\\,b\\;c\\\\d");
  CHECK(summaries[4] == long_name);
}
