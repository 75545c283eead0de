// The holiday CSV reader: both header layouts, RFC 4180 quoting, nulls, and every refusal with its line.

#include <doctest/doctest.h>

#include "holidays/holiday_csv.hpp"

namespace {

using namespace sluice::holidays;

const std::string unservable =
    "the name contains a control character (or U+FFFE, U+FFFF), which json, xml and ics cannot all carry";

std::string error_of(std::string_view text) {
  return parse_holiday_csv(text).error;
}

}  // namespace

TEST_CASE("holiday csv: name,date in file order, with LF or CRLF and a byte order mark") {
  for (std::string_view text : {"name,date\nNew Year's Day,2012-01-02\nFamily Day,2012-02-20\n",
                                "\xEF\xBB\xBFname,date\r\nNew Year's Day,2012-01-02\r\nFamily Day,2012-02-20",
                                "Date , NAME\n2012-01-02,New Year's Day\n\n2012-02-20,Family Day\n\n"}) {
    auto csv = parse_holiday_csv(text);
    REQUIRE(csv.error == "");
    REQUIRE(csv.holidays.size() == 2);
    CHECK(csv.holidays[0].name == "New Year's Day");
    CHECK(csv.holidays[0].date == "2012-01-02");
    CHECK(csv.holidays[1].name == "Family Day");
    CHECK(csv.holidays[1].date == "2012-02-20");
  }
}

TEST_CASE("holiday csv: the data steward's date,holiday layout and extra columns") {
  auto csv = parse_holiday_csv("year,date,holiday\n2026,2026-01-01,New Year\xE2\x80\x99s Day\n");
  REQUIRE(csv.error == "");
  REQUIRE(csv.holidays.size() == 1);
  CHECK(csv.holidays[0].name == "New Year\xE2\x80\x99s Day");
  CHECK(csv.holidays[0].date == "2026-01-01");
}

TEST_CASE("holiday csv: quoted fields keep commas, quotes and line breaks; empty cells are null") {
  auto csv = parse_holiday_csv(
      "name,date\n\"Day, \"\"the\"\" first\",2012-01-02\n,2012-01-03\nNo date,\n\"Two\nlines\", \n");
  REQUIRE(csv.error == "line 5: " + unservable);
  csv = parse_holiday_csv("name,date\n\"Day, \"\"the\"\" first\",2012-01-02\n,2012-01-03\n  No date  ,\n");
  REQUIRE(csv.error == "");
  REQUIRE(csv.holidays.size() == 3);
  CHECK(csv.holidays[0].name == "Day, \"the\" first");
  CHECK_FALSE(csv.holidays[1].name);
  CHECK(csv.holidays[1].date == "2012-01-03");
  CHECK(csv.holidays[2].name == "No date");
  CHECK_FALSE(csv.holidays[2].date);
}

TEST_CASE("holiday csv: refusals say the line and the reason") {
  CHECK(error_of("") == "the file is empty (expected a header such as name,date)");
  CHECK(error_of("name,date\n") == "the file has a header but no holidays");
  CHECK(error_of("title,day\nx,2012-01-01\n") ==
        "line 1: the header needs a name (or holiday) and a date column, got 'title,day'");
  CHECK(error_of("name,date,holiday\n") == "line 1: two name columns");
  CHECK(error_of("name,date\na,2012-01-01\nb,2012-01-02,extra\n") == "line 3: 3 fields, the header has 2");
  CHECK(error_of("name,date\na,2012-01-01\nb\n") == "line 3: 1 field, the header has 2");
  CHECK(error_of("name,date\na,2012-13-01\n") == "line 2: date '2012-13-01' is not a Y-m-d calendar date");
  CHECK(error_of("name,date\na,2013-02-29\n") == "line 2: date '2013-02-29' is not a Y-m-d calendar date");
  CHECK(error_of("name,date\na,2012-02-29\n") == "");  // a leap day
  CHECK(error_of("name,date\na,Monday January 2\n") ==
        "line 2: date 'Monday January 2' is not a Y-m-d calendar date");
  CHECK(error_of("name,date\na,2012-1-2\n") == "line 2: date '2012-1-2' is not a Y-m-d calendar date");
  CHECK(error_of("name,date\n\"a,2012-01-01\n") == "line 2: a quoted field is not closed");
  CHECK(error_of("name,date\n\"a\"b,2012-01-01\n") == "line 2: unexpected text after a closing quote");
  CHECK(error_of("name,date\na\"b,2012-01-01\n") ==
        "line 2: a quote inside an unquoted field (quote the whole field)");
  CHECK(error_of("name,date\n\"multi\nline\",2012-01-01\nx,bad\n") == "line 2: " + unservable);
  CHECK(error_of("name,date\nok,2012-01-01\n\"x\",2012-01-01\nCaf\xC3,2012-01-02\n") ==
        "line 4: not valid UTF-8");
}

TEST_CASE("holiday csv: names every format can carry; blank lines before the header") {
  CHECK(error_of("name,date\nA\xC2\x85"
                 "B,2012-01-01\n") == "line 2: " + unservable);  // C1 control U+0085
  CHECK(error_of("name,date\nok,2012-01-01\nA\xEF\xBF\xBE,2012-01-01\n") ==
        "line 3: " + unservable);                                                      // U+FFFE
  CHECK(error_of("name,date\nCaf\xC3\xA9 \xEF\xBF\xBD \xC2\xA0,2012-01-01\n") == "");  // é, U+FFFD, NBSP
  auto csv = parse_holiday_csv("\n\r\nname,date\nA,2012-01-01\n");
  REQUIRE(csv.error == "");
  CHECK(csv.holidays.size() == 1);
  CHECK(error_of("\n\ntitle,day\n") ==
        "line 3: the header needs a name (or holiday) and a date column, got 'title,day'");
  // A lone CR ends a line for both the record reader and the UTF-8 check.
  CHECK(error_of("name,date\rA,2012-01-01\rB\xFF,2012-01-02\r") == "line 3: not valid UTF-8");
  CHECK(error_of("name,date\rA,2012-01-01\rB,2012-01-99\r") ==
        "line 3: date '2012-01-99' is not a Y-m-d calendar date");
}

TEST_CASE("holiday csv: a record's line counts the line breaks inside earlier quoted fields") {
  // No control characters in names, so a multi-line field is only legal in an ignored column.
  CHECK(error_of("note,name,date\n\"one\ntwo\",a,2012-01-01\n,b,2012-99-01\n") ==
        "line 4: date '2012-99-01' is not a Y-m-d calendar date");
}
