#include "ratelimit/config/calendar.hpp"

#include <date/tz.h>

#include <algorithm>

namespace sluice::ratelimit::config {

namespace {

using date::local_seconds;
using std::chrono::seconds;

constexpr std::int64_t day = 86'400;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return q * b > a ? q - 1 : q;
}

std::int64_t floor_to(std::int64_t a, std::int64_t step) {
  return floor_div(a, step) * step;
}

// The first instant whose local time is at or after `local`: the local time itself when it exists (its
// earlier instant when it happens twice), the transition when clocks jumped over it.
std::int64_t first_instant(const date::time_zone& zone, std::int64_t local) {
  const auto info = zone.get_info(local_seconds{seconds{local}});
  if (info.result == date::local_info::nonexistent) return info.first.end.time_since_epoch().count();
  return local - info.first.offset.count();
}

std::int64_t days_of_month_start(std::int64_t months) {  // months since January 1970
  const auto y = date::year{static_cast<int>(1970 + floor_div(months, 12))};
  const auto m = date::month{static_cast<unsigned>(months - floor_div(months, 12) * 12 + 1)};
  return date::sys_days{y / m / 1}.time_since_epoch().count();
}

}  // namespace

const date::time_zone* find_time_zone(const std::string& name) {
  return date::locate_zone(name);
}

calendar_window calendar_window_at(const date::time_zone& zone, unit u, std::uint32_t multiplier,
                                   std::int64_t now) {
  const std::int64_t m = std::max<std::uint32_t>(1, multiplier);
  const auto info = zone.get_info(date::sys_seconds{seconds{now}});
  const std::int64_t local = now + info.offset.count();
  std::int64_t from = 0, to = 0;  // local seconds
  switch (u) {
    case unit::second:  // (refused at load: the same in every zone)
    case unit::minute:
    case unit::hour:
    case unit::day: {
      const std::int64_t step = unit_seconds(u) * m;
      from = floor_to(local, step);
      to = from + step;
      break;
    }
    case unit::week: {
      // Weeks from Monday 1969-12-29 (1970-01-01 was a Thursday).
      const std::int64_t monday = -3 * day;
      from = floor_to(local - monday, 7 * day * m) + monday;
      to = from + 7 * day * m;
      break;
    }
    case unit::month: {
      const auto ymd = date::year_month_day{date::sys_days{date::days{floor_div(local, day)}}};
      const std::int64_t months =
          (static_cast<int>(ymd.year()) - 1970) * 12 + static_cast<unsigned>(ymd.month()) - 1;
      const std::int64_t first = floor_to(months, m);
      from = days_of_month_start(first) * day;
      to = days_of_month_start(first + m) * day;
      break;
    }
    case unit::year: {
      const auto ymd = date::year_month_day{date::sys_days{date::days{floor_div(local, day)}}};
      const std::int64_t first = floor_to(static_cast<int>(ymd.year()) - 1970, m);  // years since 1970
      from = days_of_month_start(first * 12) * day;
      to = days_of_month_start((first + m) * 12) * day;
      break;
    }
    case unit::unknown:
      break;
  }
  calendar_window w{first_instant(zone, from), first_instant(zone, to)};
  // A window whose bound falls inside a local span that happens twice would hold two pieces of time; no hour,
  // day, week, month or year of today's zones does, but should one: the piece that holds now, in its offset.
  if (w.start > now || w.end <= now) w = {now - (local - from), now + (to - local)};
  return w;
}

std::int64_t longest_calendar_window(unit u, std::uint32_t multiplier) {
  const std::int64_t m = std::max<std::uint32_t>(1, multiplier);
  switch (u) {
    case unit::month:
      return 31 * day * m + 3600;
    case unit::year:
      return 366 * day * m + 3600;
    case unit::week:
      return 7 * day * m + 3600;
    default:
      return unit_seconds(u) * m + 3600;  // a local hour that repeats, a 25-hour day
  }
}

}  // namespace sluice::ratelimit::config
