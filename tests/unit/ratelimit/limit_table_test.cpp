// The limit table's CSV parser and lookup (config/limit_table.hpp): every form a row may take, every bad
// input with its line and message, and the memory a row costs.

#include <doctest/doctest.h>

#include <string>

#include "ratelimit/config/limit_table.hpp"

using namespace sluice::ratelimit::config;

namespace {

// The error parse() throws for `csv`, as "<line>: <message>".
std::string error_of(const std::string& csv, std::size_t max_rows = 100) {
  try {
    limit_table::parse(csv, max_rows);
  } catch (const table_error& e) {
    return std::to_string(e.line) + ": " + e.message;
  }
  return "no error";
}

}  // namespace

TEST_CASE("limit table: rows with and without a unit, unlimited, 0, quoting, CRLF and blank lines") {
  const auto table = limit_table::parse(
      "value,requests_per_unit,unit\r\n"
      "acme,100,minute\r\n"
      "\r\n"
      "  spaced  , 7 \n"
      "\"a,b\",5,HOUR\n"
      "\"say \"\"hi\"\"\",1,Day\n"
      "\" kept \",2\n"
      "free,unlimited\n"
      "blocked,0\n"
      "big,4294967295,week\n",
      100);
  CHECK(table.size() == 8);
  CHECK(*table.find("acme") == table_row{100, unit::minute, false});
  CHECK(*table.find("spaced") == table_row{7, unit::unknown, false});
  CHECK(*table.find("a,b") == table_row{5, unit::hour, false});
  CHECK(*table.find("say \"hi\"") == table_row{1, unit::day, false});
  CHECK(table.find(" kept ") != nullptr);
  CHECK(table.find("kept") == nullptr);
  CHECK(table.find("free")->unlimited);
  CHECK(*table.find("blocked") == table_row{0, unit::unknown, false});
  CHECK(*table.find("big") == table_row{4294967295u, unit::week, false});
  CHECK(table.find("ACME") == nullptr);  // values are exact
  CHECK(table.find("") == nullptr);
  std::size_t visited = 0;
  table.for_each([&](std::string_view, const table_row&) { ++visited; });
  CHECK(visited == 8);
}

TEST_CASE("limit table: a header alone is an empty table; the header may leave the unit out") {
  CHECK(limit_table::parse("value,requests_per_unit\n", 10).size() == 0);
  CHECK(limit_table::parse("Value , Requests_Per_Unit", 10).find("x") == nullptr);
  CHECK(limit_table::parse("value,requests_per_unit\nx,3", 10).find("x")->requests_per_unit == 3);
}

TEST_CASE("limit table: bad tables name the line and what is wrong") {
  CHECK(error_of("") == "0: no header (value,requests_per_unit[,unit])");
  CHECK(error_of("\n\n") == "0: no header (value,requests_per_unit[,unit])");
  CHECK(error_of("tenant,limit\n") ==
        "1: the header must be value,requests_per_unit[,unit], not 'tenant,limit'");
  CHECK(error_of("value,requests_per_unit,extra\n").starts_with("1: the header must be"));
  CHECK(error_of("value,requests_per_unit\na,1\nb,2\na,3\n") == "4: the value 'a' is on line 2 already");
  CHECK(error_of("value,requests_per_unit\na,-1\n") ==
        "2: requests_per_unit '-1' is not a whole number from 0 to 4294967295 or 'unlimited'");
  CHECK(error_of("value,requests_per_unit\na,4294967296\n").starts_with("2: requests_per_unit '4294967296'"));
  CHECK(error_of("value,requests_per_unit\na,1.5\n").starts_with("2: requests_per_unit '1.5'"));
  CHECK(error_of("value,requests_per_unit\na,\n").starts_with("2: requests_per_unit ''"));
  CHECK(error_of("value,requests_per_unit,unit\na,1,fortnight\n") ==
        "2: unknown unit 'fortnight' (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)");
  CHECK(error_of("value,requests_per_unit,unit\na,unlimited,hour\n") ==
        "2: an unlimited row has no unit (found 'hour')");
  CHECK(error_of("value,requests_per_unit\na,1,hour\n") ==
        "2: 3 fields where the header has 2 (quote a value that holds a comma)");
  CHECK(error_of("value,requests_per_unit,unit\na,1,hour,x\n")
            .starts_with("2: 4 fields where the header has 2 or 3"));
  // Too few fields is never a comma inside a value: no hint to quote one; a count of 1 is singular.
  CHECK(error_of("value,requests_per_unit\na\n") == "2: 1 field where the header has 2");
  CHECK(error_of("value,requests_per_unit,unit\n\"a\"\n") == "2: 1 field where the header has 2 or 3");
  CHECK(error_of("value,requests_per_unit\n,1\n") == "2: the value is empty");
  CHECK(error_of("value,requests_per_unit\n\"open,1\n") == "2: a quoted field is not closed on its line");
  CHECK(error_of("value,requests_per_unit\n\"a\"b,1\n") == "2: text after a quoted field's closing quote");
  CHECK(error_of("value,requests_per_unit\na\"b,1\n").starts_with("2: a quote inside an unquoted field"));
  CHECK(error_of("value,requests_per_unit\n" + std::string(9000, 'x') + ",1\n") ==
        "2: longer than 8192 bytes");
  CHECK(error_of("value,requests_per_unit\na,1\nb,2\nc,3\n", 2) ==
        "4: more than 2 rows (LIMIT_TABLES_MAX_ROWS)");
  // A long bad field is cut short in the message.
  CHECK(error_of("value,requests_per_unit\na," + std::string(200, '9') + "\n").size() < 150);
}

TEST_CASE("limit table: a Redis field's limit") {
  std::string why;
  CHECK(*parse_table_limit("100", why) == table_row{100, unit::unknown, false});
  CHECK(*parse_table_limit(" 100 / minute ", why) == table_row{100, unit::minute, false});
  CHECK(parse_table_limit("UNLIMITED", why)->unlimited);
  CHECK(*parse_table_limit("0/HOUR", why) == table_row{0, unit::hour, false});
  CHECK_FALSE(parse_table_limit("100/", why));
  CHECK(why == "'100/' names no unit after '/'");
  CHECK_FALSE(parse_table_limit("lots", why));
  CHECK(why == "requests_per_unit 'lots' is not a whole number from 0 to 4294967295 or 'unlimited'");
  CHECK_FALSE(parse_table_limit("5/eon", why));
  CHECK(why.starts_with("unknown unit 'eon'"));
  CHECK_FALSE(parse_table_limit("", why));
}

TEST_CASE("limit table: a million rows cost under 100 bytes a row beyond their values") {
  std::string csv = "value,requests_per_unit,unit\n";
  std::size_t value_bytes = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const std::string value = "tenant-" + std::to_string(i);
    value_bytes += value.size();
    csv += value + "," + std::to_string(i % 5000) + (i % 2 == 0 ? ",minute\n" : "\n");
  }
  const auto table = limit_table::parse(csv, 10'000'000);
  REQUIRE(table.size() == 1'000'000);
  const double per_row = static_cast<double>(table.memory_bytes() - value_bytes) / 1e6;
  MESSAGE("bytes per row beyond the values: ", per_row);
  CHECK(per_row <= 100);
  CHECK(*table.find("tenant-4242") == table_row{4242, unit::minute, false});
  CHECK(*table.find("tenant-999999") == table_row{999999 % 5000, unit::unknown, false});
  CHECK(table.find("tenant-1000000") == nullptr);
}
