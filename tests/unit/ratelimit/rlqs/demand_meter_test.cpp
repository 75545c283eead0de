// One client's demand for one bucket (demand_meter.hpp): requests per second over the last three report
// intervals, timed by the server's clock; a 0/0 report means idle at once.

#include "ratelimit/rlqs/demand_meter.hpp"

#include <doctest/doctest.h>

#include <cstdint>

namespace rlqs = sluice::ratelimit::rlqs;

namespace {

constexpr std::int64_t t0 = 1'700'000'000'000'000;  // µs since the epoch
constexpr std::int64_t second = 1'000'000;

}  // namespace

TEST_CASE("demand_meter: no rate after a single report (no interval to divide by)") {
  rlqs::demand_meter m;
  CHECK_FALSE(m.rate().has_value());
  CHECK(m.last_busy_us() == 0);
  m.report(10, t0);
  CHECK_FALSE(m.rate().has_value());
  CHECK(m.last_busy_us() == t0);
}

TEST_CASE("demand_meter: requests per second over the last three intervals, by the given clock") {
  rlqs::demand_meter m;
  m.report(10, t0);  // the first report opens the first interval; its requests came before it
  m.report(20, t0 + 1 * second);
  REQUIRE(m.rate().has_value());
  CHECK(*m.rate() == doctest::Approx(20.0));  // {20 in 1 s}
  m.report(10, t0 + 3 * second);
  CHECK(*m.rate() == doctest::Approx(10.0));  // {20/1s, 10/2s}: 30 / 3 s
  m.report(40, t0 + 4 * second);
  CHECK(*m.rate() == doctest::Approx(17.5));  // {20/1s, 10/2s, 40/1s}: 70 / 4 s
  m.report(60, t0 + 6 * second);
  CHECK(*m.rate() == doctest::Approx(22.0));  // the oldest drops: {10/2s, 40/1s, 60/2s}: 110 / 5 s
  m.report(5, t0 + 11 * second);
  CHECK(*m.rate() == doctest::Approx(105.0 / 8));  // {40/1s, 60/2s, 5/5s}: 105 / 8 s = 13.125
  CHECK(m.last_busy_us() == t0 + 11 * second);
}

TEST_CASE("demand_meter: two reports within a millisecond merge into the current interval") {
  rlqs::demand_meter m;
  m.report(10, t0);
  m.report(10, t0 + second);
  CHECK(*m.rate() == doctest::Approx(10.0));  // {10/1s}
  m.report(5, t0 + second + 500);
  CHECK(*m.rate() == doctest::Approx(15.0));  // {15/1s}: no zero-length interval
  m.report(15, t0 + 2 * second + 500);
  CHECK(*m.rate() == doctest::Approx(15.0));  // {15/1s, 15/1s}: 30 / 2 s
}

TEST_CASE("demand_meter: a 0/0 report means idle at once") {
  rlqs::demand_meter m;
  m.report(100, t0);
  m.report(100, t0 + second);
  CHECK(*m.rate() == doctest::Approx(100.0));
  m.report(0, t0 + 2 * second);
  REQUIRE(m.rate().has_value());
  CHECK(*m.rate() == 0.0);                 // not the average of {100/1s, 0/1s}
  CHECK(m.last_busy_us() == t0 + second);  // an idle report is not busy

  SUBCASE("a first report of 0/0 is idle too") {
    rlqs::demand_meter fresh;
    fresh.report(0, t0);
    REQUIRE(fresh.rate().has_value());
    CHECK(*fresh.rate() == 0.0);
    CHECK(fresh.last_busy_us() == 0);
  }
}

TEST_CASE("demand_meter: a busy report after idle measures from the idle report") {
  rlqs::demand_meter m;
  m.report(10, t0);
  m.report(10, t0 + second);     // {10/1s}
  m.report(0, t0 + 2 * second);  // idle: the intervals before are forgotten
  m.report(0, t0 + 3 * second);
  m.report(30, t0 + 5 * second);  // 30 since the last (idle) report, 2 s ago
  REQUIRE(m.rate().has_value());
  CHECK(*m.rate() == doctest::Approx(15.0));  // 30 / 2 s, not (10 + 30) / 3 s nor 30 / 5 s
  CHECK(m.last_busy_us() == t0 + 5 * second);
  m.report(45, t0 + 8 * second);
  CHECK(*m.rate() == doctest::Approx(15.0));  // {30/2s, 45/3s}: 75 / 5 s
}

TEST_CASE("demand_meter: denied requests count as demand (the caller adds allowed + denied)") {
  rlqs::demand_meter m;
  m.report(3, t0);
  m.report(3 + 7, t0 + 2 * second);
  CHECK(*m.rate() == doctest::Approx(5.0));  // 10 / 2 s
}
