#pragma once
// The holiday list as an RFC 5545 iCalendar: one all-day VEVENT per dated holiday (SUMMARY, DTSTART and DTEND
// as VALUE=DATE, a UID that stays the same across reloads, DTSTAMP), CRLF line ends, lines folded at 75
// octets without splitting a UTF-8 character. A holiday without a date cannot be an event and is left out.

#include <cstdint>
#include <string>
#include <vector>

#include "holidays/holiday_csv.hpp"

namespace sluice::holidays {

// `stamp`: Unix seconds of the list version (DTSTAMP of every event).
std::string ics_calendar(const std::vector<holiday>& holidays, std::int64_t stamp);

}  // namespace sluice::holidays
