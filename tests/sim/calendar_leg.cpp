// Calendar windows (time_zone) on the memory store, several workers: fixed and sliding windows of a local
// hour (or 6), day, week, month (or quarter) or year in zones with DST changes at 01:00, 02:00 and midnight
// (a midnight that does not exist), half-hour changes (Australia/Lord_Howe) and odd offsets (Asia/Kathmandu,
// Pacific/Chatham). Each seed spends its hours around one instant worth testing: a DST change of its zone, a
// month's end, 29 February 2028 or a new year; requests land just before and just after every boundary (to
// the microsecond) and in between. The model's windows come from the zone database alone: an instant's window
// is its local time's period (local hours, days, weeks from Monday, months or years counted from 1970,
// divided by the multiplier), and a window starts at the first instant whose local time is in it. Checked at
// every decision: the code, limit_remaining and duration_until_reset the model gives (a sliding window weighs
// the previous window by the share of the current one still to come), and that the model's window starts and
// ends where the local period changes.
#include <date/tz.h>

#include <map>

#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace calendar_sim {

using seconds = std::chrono::seconds;
using sys_seconds = date::sys_seconds;

struct unit_shape {
  const char* unit;
  std::int64_t multiplier;
};

// The period of the local calendar that holds `t` (Unix seconds), `multiplier` units from 1970 a period.
std::int64_t period_of(const date::time_zone& zone, const unit_shape& u, std::int64_t t) {
  const auto local = zone.to_local(sys_seconds(seconds(t)));
  const auto days = date::floor<date::days>(local);
  const std::string unit = u.unit;
  std::int64_t index = 0;
  if (unit == "hour") {
    index = date::floor<std::chrono::hours>(local).time_since_epoch().count();
  } else if (unit == "day") {
    index = days.time_since_epoch().count();
  } else if (unit == "week") {
    index = (days.time_since_epoch().count() + 3) / 7;  // 1970-01-01 was a Thursday: weeks from 1969-12-29
  } else {
    const date::year_month_day ymd(days);
    const std::int64_t months = (static_cast<int>(ymd.year()) - 1970) * 12 +
                                static_cast<std::int64_t>(static_cast<unsigned>(ymd.month())) - 1;
    index = unit == "month" ? months : months / 12;
  }
  return index >= 0 ? index / u.multiplier : (index - u.multiplier + 1) / u.multiplier;
}

// The first instant of period `p` (Unix seconds): its local start, or the instant a DST change jumped over
// it.
std::int64_t period_start(const date::time_zone& zone, const unit_shape& u, std::int64_t p) {
  const std::string unit = u.unit;
  const std::int64_t first = p * u.multiplier;
  date::local_seconds local;
  if (unit == "hour") {
    local = date::local_seconds(std::chrono::hours(first));
  } else if (unit == "day") {
    local = date::local_seconds(date::days(first));
  } else if (unit == "week") {
    local = date::local_seconds(date::days(first * 7 - 3));
  } else {
    const std::int64_t months = unit == "month" ? first : first * 12;
    const date::year_month_day ymd(date::year(static_cast<int>(1970 + months / 12)),
                                   date::month(static_cast<unsigned>(months % 12 + 1)), date::day(1));
    local = date::local_days(ymd);
  }
  return zone.to_sys(local, date::choose::earliest).time_since_epoch().count();
}

struct tenant_counts {
  std::map<std::int64_t, std::uint64_t> by_period;
};

// The instants worth a seed's hours in `zone`: its DST changes in 2027-2028, the 1st of every month, 29
// February and 1 March 2028, 1 January 2028 (local midnights).
std::vector<std::int64_t> focus_instants(const date::time_zone& zone) {
  std::vector<std::int64_t> out;
  std::int64_t t = 1'798'761'600;  // 2027-01-01T00:00:00Z
  while (t < 1'861'920'000) {      // 2029-01-01
    const auto info = zone.get_info(sys_seconds(seconds(t)));
    t = info.end.time_since_epoch().count();
    if (t < 1'861'920'000) out.push_back(t);
  }
  for (int m = 0; m < 24; ++m) {
    const date::year_month_day first(date::year(2027 + m / 12),
                                     date::month(static_cast<unsigned>(m % 12 + 1)), date::day(1));
    out.push_back(zone.to_sys(date::local_days(first), date::choose::earliest).time_since_epoch().count());
  }
  out.push_back(zone.to_sys(date::local_days(date::year(2028) / 2 / 29), date::choose::earliest)
                    .time_since_epoch()
                    .count());
  return out;
}

// The model's window holding the instant `t` (Unix seconds), checked against the definition: the local
// period changes exactly at its start and end (to the next one, or past a period a DST change jumped over).
struct model_window {
  std::int64_t period, start, end;
};

model_window window_at(const date::time_zone& zone, const unit_shape& u, std::int64_t t, checker& check,
                       std::int64_t at, const std::string& where) {
  const std::int64_t period = period_of(zone, u, t);
  const model_window w{period, period_start(zone, u, period), period_start(zone, u, period + 1)};
  check.expect(w.start <= t && t < w.end && period_of(zone, u, w.end - 1) == period &&
                   period_of(zone, u, w.end) > period && period_of(zone, u, w.start) == period,
               at, where, ": the model's window [", w.start, ", ", w.end, ") of ", t,
               " is not where the local period changes");
  return w;
}

// One request of one hit in window `w` at `now_us`: the model's verdict and what is left, counted in `c`
// (a fixed window counts every hit, a sliding window what it admits, judged with the previous window weighed
// by the share of this one still to come).
struct expected {
  bool admits;
  std::uint64_t remaining, current, previous;
};

expected count_request(tenant_counts& c, const model_window& w, std::int64_t now_us, bool sliding,
                       std::uint64_t limit) {
  auto& current = c.by_period[w.period];
  const auto found = c.by_period.find(w.period - 1);
  const std::uint64_t previous = found == c.by_period.end() ? 0 : found->second;
  const std::int64_t length = (w.end - w.start) * second;
  const std::uint64_t weighted =
      sliding ? (previous * static_cast<std::uint64_t>(w.end * second - now_us) + length - 1) / length : 0;
  const bool admits = weighted + current + 1 <= limit;
  if (admits || !sliding) ++current;
  const expected out{admits, admits ? limit - std::min(limit, current + weighted) : 0, current, previous};
  std::erase_if(c.by_period, [&](const auto& kv) { return kv.first < w.period - 1; });
  return out;
}

// The next request's time: just before or after the window's end (to the microsecond), or a gap.
std::int64_t next_instant(random& rng, std::int64_t now, std::int64_t window_end_s, std::int64_t end_us,
                          std::int64_t mean_gap_us) {
  const std::int64_t choice = rng.between(0, 9);
  const bool end_in_run = window_end_s * second < end_us;
  if (choice < 2 && end_in_run) return std::max(now, window_end_s * second - rng.between(0, 2 * second));
  if (choice < 4 && end_in_run) return window_end_s * second + rng.between(0, 2 * second);
  return now + rng.between(0, 2 * mean_gap_us);
}

run_result run(const run_params& p) {
  random rng(p.seed);
  const std::string zone_name = rng.pick(
      std::vector<std::string>{"America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago",
                               "Asia/Kathmandu", "Pacific/Chatham", "Asia/Beirut", "America/St_Johns"});
  const auto* zone = date::locate_zone(zone_name);
  const unit_shape u = rng.pick(std::vector<unit_shape>{
      {"hour", 1}, {"hour", 6}, {"day", 1}, {"week", 1}, {"month", 1}, {"month", 3}, {"year", 1}});
  const bool sliding = rng.chance(0.4);
  const auto limit = static_cast<std::uint64_t>(rng.pick(std::vector<std::int64_t>{3, 10, 50}));
  const std::int64_t mean_gap_us = rng.pick(std::vector<std::int64_t>{5 * second, 60 * second, 600 * second});
  const int tenants = static_cast<int>(rng.between(1, 3));
  checker check;
  world w("domain: sim\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: " + std::string(u.unit) +
              ", unit_multiplier: " + std::to_string(u.multiplier) +
              ", requests_per_unit: " + std::to_string(limit) + ", time_zone: " + zone_name +
              (sliding ? ", algorithm: sliding_window" : "") + "}\n",
          static_cast<int>(rng.between(2, 4)), check, store_kind::memory, p.variant);
  const auto focus = rng.pick(focus_instants(*zone));
  const std::int64_t first_us = (focus - rng.between(0, 36 * 3600)) * second;
  const std::int64_t end_us = first_us + static_cast<std::int64_t>(p.hours * static_cast<double>(hour));
  const std::string where =
      zone_name + ", " + std::to_string(u.multiplier) + " " + u.unit + (sliding ? " sliding" : "");

  run_result out;
  std::vector<tenant_counts> counts(static_cast<std::size_t>(tenants));
  std::int64_t now = first_us;
  w.clock.set_micros(now);
  while (now < end_us && !check.failed()) {
    const std::int64_t t = now / second;
    const auto win = window_at(*zone, u, t, check, now - first_us, where);
    const int tenant = static_cast<int>(rng.between(0, tenants - 1));
    const auto e = count_request(counts[static_cast<std::size_t>(tenant)], win, now, sliding, limit);
    const auto st =
        w.decide_anywhere(rng, make_request("sim", {{"tenant", "t" + std::to_string(tenant)}})).statuses(0);
    ++out.decisions;
    const std::int64_t reset = std::max<std::int64_t>(1, win.end - t);
    check.expect(st.code() == (e.admits ? rls_response::OK : rls_response::OVER_LIMIT) &&
                     st.limit_remaining() == e.remaining && st.duration_until_reset().seconds() == reset,
                 now - first_us, where, ", tenant t", tenant, " at ", now, " us (window [", win.start, ", ",
                 win.end, "), ", e.current, " counted, ", e.previous, " before): the model ",
                 e.admits ? "admits" : "refuses", " with ", e.remaining, " left and ", reset,
                 " s to reset; the store ", st.code() == rls_response::OK ? "admits" : "refuses", " with ",
                 st.limit_remaining(), " and ", st.duration_until_reset().seconds());
    now = next_instant(rng, now, win.end, end_us, mean_gap_us);
    w.clock.set_micros(now);
  }
  return check.finish(out, start_us + (now - first_us));
}

}  // namespace calendar_sim

leg calendar_leg() {
  return {"calendar memory", 24, calendar_sim::run, {"window off by one second"}};
}

}  // namespace sluice::sim
