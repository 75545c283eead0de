// Calendar windows (`time_zone`): exact bounds across DST changes, month, year and leap-year ends in
// America/New_York, Europe/Berlin, Australia/Lord_Howe (30-minute DST) and Asia/Kathmandu (+05:45); windows
// tile time (each ends where the next starts); and decisions on a fake clock.
#include <doctest/doctest.h>

#include <date/date.h>

#include <random>
#include <string>

#include "ratelimit/config/calendar.hpp"
#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using config::unit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

namespace {

// Unix seconds of a UTC date and time.
std::int64_t utc(int y, unsigned m, unsigned d, int hh = 0, int mm = 0) {
  const auto days = date::sys_days{date::year{y} / date::month{m} / date::day{d}}.time_since_epoch().count();
  return days * 86'400 + hh * 3600 + mm * 60;
}

config::calendar_window at(const char* zone, unit u, std::int64_t now, std::uint32_t multiplier = 1) {
  return config::calendar_window_at(*config::find_time_zone(zone), u, multiplier, now);
}

void check_window(const char* zone, unit u, std::int64_t now, std::int64_t start, std::int64_t end,
                  std::uint32_t multiplier = 1) {
  CAPTURE(std::string(zone));
  CAPTURE(now);
  const auto w = at(zone, u, now, multiplier);
  CHECK(w.start == start);
  CHECK(w.end == end);
}

constexpr std::int64_t hour = 3600;

}  // namespace

TEST_CASE("America/New_York: 23- and 25-hour days, the repeated hour, weeks from Monday, the year") {
  // 2026-03-08: 02:00 EST becomes 03:00 EDT.
  check_window("America/New_York", unit::day, utc(2026, 3, 8, 12), utc(2026, 3, 8, 5), utc(2026, 3, 9, 4));
  // 2026-11-01: 02:00 EDT becomes 01:00 EST; the local hour 01:00 happens twice: one window of two hours.
  check_window("America/New_York", unit::day, utc(2026, 11, 1, 12), utc(2026, 11, 1, 4), utc(2026, 11, 2, 5));
  check_window("America/New_York", unit::hour, utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 5),
               utc(2026, 11, 1, 7));
  check_window("America/New_York", unit::hour, utc(2026, 11, 1, 6, 30), utc(2026, 11, 1, 5),
               utc(2026, 11, 1, 7));
  check_window("America/New_York", unit::hour, utc(2026, 11, 1, 7, 30), utc(2026, 11, 1, 7),
               utc(2026, 11, 1, 8));
  // The spring's 02:00 never happens: the 01:00 hour ends at 03:00 EDT, an hour later.
  check_window("America/New_York", unit::hour, utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 6),
               utc(2026, 3, 8, 7));
  check_window("America/New_York", unit::hour, utc(2026, 3, 8, 7, 30), utc(2026, 3, 8, 7),
               utc(2026, 3, 8, 8));
  // Saturday 2026-11-28: the week began on Monday the 23rd.
  check_window("America/New_York", unit::week, utc(2026, 11, 28, 15), utc(2026, 11, 23, 5),
               utc(2026, 11, 30, 5));
  check_window("America/New_York", unit::year, utc(2026, 12, 31, 23), utc(2026, 1, 1, 5), utc(2027, 1, 1, 5));
  check_window("America/New_York", unit::year, utc(2027, 1, 1, 5), utc(2027, 1, 1, 5), utc(2028, 1, 1, 5));
  check_window("America/New_York", unit::month, utc(2027, 1, 1, 4, 59), utc(2026, 12, 1, 5),
               utc(2027, 1, 1, 5));
}

TEST_CASE("Europe/Berlin: months, quarters and a leap February, in local time") {
  check_window("Europe/Berlin", unit::day, utc(2026, 3, 29, 12), utc(2026, 3, 28, 23), utc(2026, 3, 29, 22));
  check_window("Europe/Berlin", unit::day, utc(2026, 10, 25, 12), utc(2026, 10, 24, 22),
               utc(2026, 10, 25, 23));
  check_window("Europe/Berlin", unit::month, utc(2026, 10, 31, 23, 30), utc(2026, 10, 31, 23),
               utc(2026, 11, 30, 23));
  check_window("Europe/Berlin", unit::month, utc(2026, 10, 31, 22, 59), utc(2026, 9, 30, 22),
               utc(2026, 10, 31, 23));
  check_window("Europe/Berlin", unit::month, utc(2028, 2, 29, 12), utc(2028, 1, 31, 23),
               utc(2028, 2, 29, 23));
  check_window("Europe/Berlin", unit::month, utc(2027, 2, 15), utc(2027, 1, 31, 23), utc(2027, 2, 28, 23));
  // 3 × MONTH: quarters from January, April, July and October.
  check_window("Europe/Berlin", unit::month, utc(2026, 5, 15), utc(2026, 3, 31, 22), utc(2026, 6, 30, 22), 3);
  check_window("Europe/Berlin", unit::month, utc(2026, 12, 31, 23, 30), utc(2026, 12, 31, 23),
               utc(2027, 3, 31, 22), 3);
  check_window("Europe/Berlin", unit::year, utc(2028, 6, 1), utc(2027, 12, 31, 23), utc(2028, 12, 31, 23));
}

TEST_CASE("Australia/Lord_Howe: DST of half an hour makes days of 23.5 and 24.5 hours and a 30-minute hour") {
  // 2026-04-05 02:00 +11 becomes 01:30 +10:30.
  check_window("Australia/Lord_Howe", unit::day, utc(2026, 4, 5), utc(2026, 4, 4, 13),
               utc(2026, 4, 5, 13, 30));
  // The local hour 01:00 lasts 1.5 hours that night.
  check_window("Australia/Lord_Howe", unit::hour, utc(2026, 4, 4, 15, 10), utc(2026, 4, 4, 14),
               utc(2026, 4, 4, 15, 30));
  // 2026-10-04 02:00 +10:30 becomes 02:30 +11: the local hour 02:00 has 30 minutes.
  check_window("Australia/Lord_Howe", unit::day, utc(2026, 10, 4), utc(2026, 10, 3, 13, 30),
               utc(2026, 10, 4, 13));
  check_window("Australia/Lord_Howe", unit::hour, utc(2026, 10, 3, 15, 45), utc(2026, 10, 3, 15, 30),
               utc(2026, 10, 3, 16));
  check_window("Australia/Lord_Howe", unit::year, utc(2026, 12, 31, 13), utc(2026, 12, 31, 13),
               utc(2027, 12, 31, 13));
}

TEST_CASE("Asia/Kathmandu: hours start at a quarter past in UTC") {
  check_window("Asia/Kathmandu", unit::hour, utc(2026, 6, 1), utc(2026, 5, 31, 23, 15),
               utc(2026, 6, 1, 0, 15));
  check_window("Asia/Kathmandu", unit::day, utc(2026, 6, 1), utc(2026, 5, 31, 18, 15),
               utc(2026, 6, 1, 18, 15));
  // 2028-03-01 00:00 local: March, after a leap February.
  check_window("Asia/Kathmandu", unit::month, utc(2028, 2, 29, 18, 15), utc(2028, 2, 29, 18, 15),
               utc(2028, 3, 31, 18, 15));
  check_window("Asia/Kathmandu", unit::month, utc(2028, 2, 29, 18, 14), utc(2028, 1, 31, 18, 15),
               utc(2028, 2, 29, 18, 15));
}

TEST_CASE("calendar windows tile time: each holds its instants and ends where the next begins") {
  std::mt19937_64 rng(41);
  std::uniform_int_distribution<std::int64_t> instant(utc(2000, 1, 1), utc(2037, 1, 1));
  for (const char* zone :
       {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu", "UTC", "Asia/Tehran"}) {
    for (auto u : {unit::hour, unit::day, unit::week, unit::month, unit::year}) {
      for (std::uint32_t m : {1u, 2u, 3u}) {
        CAPTURE(std::string(zone));
        CAPTURE(static_cast<int>(u));
        CAPTURE(m);
        // Every 20 minutes through each DST day of 2026 in the zones above, and random instants.
        std::vector<std::int64_t> nows;
        for (auto day : {utc(2026, 3, 8), utc(2026, 3, 29), utc(2026, 4, 4), utc(2026, 10, 3),
                         utc(2026, 10, 25), utc(2026, 11, 1), utc(2026, 12, 31), utc(2028, 2, 28)})
          for (std::int64_t t = day; t < day + 48 * hour; t += 1200) nows.push_back(t);
        for (int i = 0; i < 300; ++i) nows.push_back(instant(rng));
        for (auto now : nows) {
          const auto w = at(zone, u, now, m);
          REQUIRE(w.start <= now);
          REQUIRE(now < w.end);
          REQUIRE(at(zone, u, w.end, m).start == w.end);
          REQUIRE(at(zone, u, w.start - 1, m).end == w.start);
          REQUIRE(w.end - w.start <= config::longest_calendar_window(u, m));
        }
      }
    }
  }
}

TEST_CASE("decisions on calendar windows: keys carry the window's start, the reset is exact") {
  service_fixture f(R"(domain: saas
descriptors:
  - key: plan
    rate_limit: {unit: month, requests_per_unit: 3, time_zone: America/New_York}
  - key: daily
    rate_limit: {unit: day, requests_per_unit: 10, algorithm: sliding_window, time_zone: Europe/Berlin}
)");
  // 2026-11-30 23:00 in New York: the month ends in an hour.
  f.clock.set_micros(utc(2026, 12, 1, 4) * 1'000'000);
  auto plan = make_request("saas", {{{"plan", "acme"}}});
  auto r = f.decide(plan);
  CHECK(r.statuses(0).duration_until_reset().seconds() == hour);
  CHECK(r.statuses(0).limit_remaining() == 2);
  limiter::counter_op op;
  const std::string key =
      "{saas_plan_acme_}" + std::to_string(utc(2026, 11, 1, 4)) + "_month_America/New_York_fixed";
  op.key = key;
  limiter::op_result held;
  struct noop final : limiter::completion {
    void complete(const limiter::backend_error*) noexcept override {}
  } done;
  f.backend.get({&op, 1}, {&held, 1}, done);
  CHECK(held.value == 1);
  f.decide(plan);
  f.decide(plan);
  CHECK(f.decide(plan).overall_code() == code::OVER_LIMIT);
  f.clock.set_micros(utc(2026, 12, 1, 5) * 1'000'000);  // December in New York
  r = f.decide(plan);
  CHECK(r.overall_code() == code::OK);
  CHECK(r.statuses(0).duration_until_reset().seconds() == utc(2027, 1, 1, 5) - utc(2026, 12, 1, 5));

  // A sliding day in Berlin: 10 on 2026-10-24 weigh on the 25-hour 25th by the share of it still to come.
  f.clock.set_micros(utc(2026, 10, 24, 12) * 1'000'000);
  auto daily = make_request("saas", {{{"daily", "d"}}}, 10);
  CHECK(f.decide(daily).overall_code() == code::OK);
  f.clock.set_micros((utc(2026, 10, 24, 22) + 5 * hour) * 1'000'000);  // 5 of the 25 hours gone
  auto check = make_request("saas", {{{"daily", "d"}}});
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  r = f.decide(check);
  CHECK(r.statuses(0).limit_remaining() == 2);  // ceil(10 × 20 / 25) = 8
  CHECK(r.statuses(0).duration_until_reset().seconds() == 20 * hour);
}

TEST_CASE("time_zone: an unknown zone names the rule, GCRA and unlimited limits refuse it") {
  auto error = [](const std::string& limit) {
    stats::store stats;
    std::vector<config::config_file> files{
        {"plans.yaml", "domain: saas\ndescriptors:\n  - key: plan\n" + limit}};
    auto r = config::load_rules(files, false, stats);
    return r.rules ? "" : r.error;
  };
  CHECK(error("    rate_limit: {unit: month, requests_per_unit: 3, time_zone: Mars/Olympus_Mons}\n") ==
        "plans.yaml: rule 'saas.plan': unknown time_zone 'Mars/Olympus_Mons' (an IANA zone name such as "
        "Europe/Berlin): Mars/Olympus_Mons not found in timezone database");
  CHECK(
      error("    rate_limit: {unit: day, requests_per_unit: 3, algorithm: gcra, time_zone: UTC}\n") ==
      "plans.yaml: time_zone is for fixed_window and sliding_window: a GCRA bucket refills continuously and "
      "has no calendar");
  CHECK(error("    rate_limit: {unlimited: true, time_zone: UTC}\n") ==
        "plans.yaml: an unlimited rate_limit takes no algorithm, unit_multiplier, accounting or time_zone");
  CHECK(error("    rate_limit: {unit: minute, requests_per_unit: 3, time_zone: Asia/Kathmandu}\n") ==
        "plans.yaml: time_zone is for units of an hour or more: a minute is the same in every zone");
  CHECK(
      error("    rate_limit: {unit: day, requests_per_unit: 3, time_zone: \"\"}\n") ==
      "plans.yaml: time_zone is empty: name an IANA zone (such as Europe/Berlin), or leave time_zone out for "
      "windows aligned to the Unix epoch");
  CHECK(error("    rate_limit: {unit: day, requests_per_unit: 3, time_zone: Europe/Berlin}\n").empty());
}

TEST_CASE("calendar windows are per worker: two services on one limiter keep their own, and count together") {
  // More zone × unit shapes than a cache holds, so that one worker's cache turns over while the other's
  // stays.
  const char* zones[] = {"America/New_York", "Europe/Berlin", "Asia/Kathmandu", "Australia/Lord_Howe",
                         "Asia/Tokyo",       "Europe/London", "America/Denver", "Pacific/Auckland",
                         "Africa/Cairo",     "Asia/Kolkata"};
  std::string yaml = "domain: saas\ndescriptors:\n";
  std::size_t shapes = 0;
  for (const char* zone : zones) {
    for (const char* u : {"day", "week"}) {
      yaml += "  - key: z" + std::to_string(shapes++) + "\n    rate_limit: {unit: " + u +
              ", requests_per_unit: 3, time_zone: " + zone + "}\n";
    }
  }
  REQUIRE(shapes > limiter::calendar_cache::max_entries);
  service_fixture f(yaml);
  // A second worker's service: the same limiter and backend, its own calendar windows.
  service::rate_limit_service second({}, f.limiter, f.backend, f.stats);
  second.set_rules(test::compile_rules(yaml, f.stats));
  f.clock.set_micros(utc(2026, 3, 10, 12) * 1'000'000);
  for (std::size_t i = 0; i < shapes; ++i) f.decide(make_request("saas", {{{"z" + std::to_string(i), "a"}}}));
  CHECK(f.service.calendars().size() == limiter::calendar_cache::max_entries);
  CHECK(second.calendars().size() == 0);

  // The second worker decides on one shape: its own cache fills, the first's is unchanged, and the counter
  // (in the shared backend) holds both workers' hits.
  test::rls_response r;
  second.should_rate_limit(make_request("saas", {{{"z0", "a"}}}), r,
                           [](const service::service_error* e) { REQUIRE(e == nullptr); });
  CHECK(second.calendars().size() == 1);
  CHECK(f.service.calendars().size() == limiter::calendar_cache::max_entries);
  CHECK(r.statuses(0).limit_remaining() == 1);
}
