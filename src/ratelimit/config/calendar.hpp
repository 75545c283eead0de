#pragma once
// Calendar windows (`time_zone` on a limit, docs/guides/monthly-plans.md): a window is a span of a zone's
// local calendar — its hour, day, week (from Monday), month or year, or `unit_multiplier` of them counted
// from the local epoch (1970-01-01; months from January 1970, so 3 months are quarters from January) — and
// holds exactly the instants whose local time falls in it. At a DST change a day has 23 or 25 hours, and a
// local hour that repeats (clocks going back) is one window of two hours. Zone data comes from the system's
// zoneinfo files (tzdata; the image carries them) through Howard Hinnant's date library, which applies the
// transitions those files list: Debian's run to 2037, after which a zone keeps the offset it had then.

#include <cstdint>
#include <string>

#include "ratelimit/config/unit.hpp"

namespace date {
class time_zone;
}

namespace sluice::ratelimit::config {

// The zone of an IANA name; throws std::runtime_error naming what is wrong when there is none.
const date::time_zone* find_time_zone(const std::string& name);

struct calendar_window {
  std::int64_t start = 0;  // Unix seconds: the first instant of the window
  std::int64_t end = 0;    // the first instant of the next one
};

// The window of `multiplier` × `u` in `zone` that holds the instant `now` (Unix seconds).
calendar_window calendar_window_at(const date::time_zone& zone, unit u, std::uint32_t multiplier,
                                   std::int64_t now);

// The longest a window of `multiplier` × `u` can last (a month of 31 days and an hour more, ...): what a
// sliding window's counter must outlive after its window ends.
std::int64_t longest_calendar_window(unit u, std::uint32_t multiplier);

}  // namespace sluice::ratelimit::config
