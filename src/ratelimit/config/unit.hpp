#pragma once
// Time units of rate limits. The numbers are those of the RLS RateLimitResponse.RateLimit.Unit enum, so a
// unit converts to the wire without a table (WEEK is 7 there, after YEAR).

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice::ratelimit::config {

enum class unit : int {
  unknown = 0,
  second = 1,
  minute = 2,
  hour = 3,
  day = 4,
  month = 5,
  year = 6,
  week = 7
};

// "second", "SECOND", "Second" ... → unit; "unknown" and anything else → nullopt.
std::optional<unit> parse_unit(std::string_view name);
// Upper-case enum name, e.g. "MINUTE"; "UNKNOWN" for unit::unknown.
std::string_view unit_name(unit u);
// Length of the fixed window in seconds (upstream's UnitToDivider): month = 30 days, year = 365 days; 0 for
// unknown.
std::int64_t unit_seconds(unit u);

}  // namespace sluice::ratelimit::config
