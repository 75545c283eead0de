// Operator control (service::rate_limit_service::control) on the memory backend and a fake clock: what each
// algorithm's counter holds, resetting and setting it, every limit of a descriptor, `replaces`, overrides and
// unlimited rules; nothing counted and no stat changed by a look; the local over-limit cache forgetting a
// reset key.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "service_fixture.hpp"
#include "stats/text_dump.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

// Named: unity builds put several test files in one translation unit.
namespace counter_control_test {

namespace {

const char* const rules = R"(domain: ops
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: plan
    rate_limits:
      - {unit: hour, requests_per_unit: 10, name: hourly}
      - {unit: day, requests_per_unit: 100, name: daily}
  - key: slide
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: gcra}
  - key: tokens
    rate_limit: {unit: minute, requests_per_unit: 60, burst: 10, algorithm: gcra, accounting: usage}
  - key: slots
    rate_limit: {requests_per_unit: 3, algorithm: concurrency, lease: 10s}
  - key: free
    rate_limit: {unlimited: true}
  - key: old
    rate_limit: {unit: hour, requests_per_unit: 1, name: old}
  - key: new
    rate_limit: {unit: hour, requests_per_unit: 9, replaces: [{name: old}]}
)";

std::vector<service::descriptor_state> control(
    service_fixture& f, const test::rls_request& req,
    service::control_action action = service::control_action::inspect, std::uint64_t used = 0) {
  std::vector<service::descriptor_state> out;
  bool called = false;
  f.service.control(req, action, used,
                    [&](const service::service_error* e, std::vector<service::descriptor_state>&& s) {
                      called = true;
                      REQUIRE_MESSAGE(e == nullptr, e->message);
                      out = std::move(s);
                    });
  REQUIRE(called);
  return out;
}

service::limit_state only(service_fixture& f, const char* key, const char* value) {
  auto states = control(f, make_request("ops", {{{key, value}}}));
  REQUIRE(states.size() == 1);
  REQUIRE(states[0].limits.size() == 1);
  return states[0].limits[0];
}

void set(service_fixture& f, const char* key, const char* value, std::uint64_t used) {
  control(f, make_request("ops", {{{key, value}}}), service::control_action::overwrite, used);
}

code::Code hit(service_fixture& f, const char* key, const char* value, std::uint32_t hits = 1) {
  return f.decide(make_request("ops", {{{key, value}}}, hits)).overall_code();
}

}  // namespace

TEST_CASE("a fixed window: read, reset, set; reading counts nothing and changes no stat") {
  service_fixture f(rules, {}, {}, 1'800'000'000);
  for (int i = 0; i < 3; ++i) hit(f, "user", "u");
  const std::string stats_before = stats::text_dump(f.stats);
  auto l = only(f, "user", "u");
  CHECK(l.rule == "ops.user");
  CHECK(l.algorithm == config::algorithm::fixed_window);
  CHECK(l.requests_per_unit == 5);
  CHECK(l.unit == config::unit::hour);
  CHECK(l.key == "ops_user_u_1800000000");
  CHECK(l.used == 3);
  CHECK(l.remaining == 2);
  CHECK(l.reset_seconds == 3600);
  CHECK(only(f, "user", "u").used == 3);
  // An unknown domain or descriptor: nothing matched, and not counted as domain_not_found.
  auto none = control(f, make_request("nowhere", {{{"user", "u"}}}));
  CHECK_FALSE(none.at(0).matched);
  CHECK_FALSE(control(f, make_request("ops", {{{"nobody", "u"}}})).at(0).matched);
  CHECK(stats::text_dump(f.stats) == stats_before);

  set(f, "user", "u", 0);
  CHECK(only(f, "user", "u").used == 0);
  CHECK(hit(f, "user", "u", 5) == code::OK);
  set(f, "user", "u", 5);
  l = only(f, "user", "u");
  CHECK(l.used == 5);
  CHECK(l.remaining == 0);
  CHECK(hit(f, "user", "u") == code::OVER_LIMIT);
  CHECK(only(f, "user", "u").used == 6);  // fixed windows count what they refuse, as upstream
}

TEST_CASE("every limit of a descriptor, overrides, unlimited and replaced rules") {
  service_fixture f(rules);
  hit(f, "plan", "p", 4);
  auto states = control(f, make_request("ops", {{{"plan", "p"}}}));
  REQUIRE(states.at(0).limits.size() == 2);
  CHECK(states[0].limits[0].name == "hourly");
  CHECK(states[0].limits[0].used == 4);
  CHECK(states[0].limits[1].name == "daily");
  CHECK(states[0].limits[1].remaining == 96);
  set(f, "plan", "p", 7);
  states = control(f, make_request("ops", {{{"plan", "p"}}}));
  CHECK(states[0].limits[0].used == 7);
  CHECK(states[0].limits[1].used == 7);

  auto unlimited = control(f, make_request("ops", {{{"free", "x"}}}));
  CHECK(unlimited.at(0).matched);
  CHECK(unlimited[0].unlimited);
  CHECK(unlimited[0].limits.empty());

  auto req = make_request("ops", {{{"old", "x"}}, {{"new", "x"}}});
  auto replaced = control(f, req);
  CHECK(replaced.at(0).replaced);
  CHECK(replaced[0].limits.empty());
  CHECK(replaced.at(1).limits.size() == 1);

  auto overridden = make_request("ops", {{{"user", "o"}}});
  overridden.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(50);
  overridden.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::RateLimitUnit::DAY);
  auto o = control(f, overridden);
  REQUIRE(o.at(0).limits.size() == 1);
  CHECK(o[0].limits[0].requests_per_unit == 50);
  CHECK(o[0].limits[0].rule == "ops.user_o");
}

TEST_CASE("a sliding window: the weighted previous window, reset drops both") {
  service_fixture f(rules, {}, {}, 1'800'000'040);  // 40 s into a minute
  for (int i = 0; i < 9; ++i) hit(f, "slide", "s");
  f.clock.advance(30);  // 10 s into the next: 9 × 50/60 of the previous still weigh
  auto l = only(f, "slide", "s");
  CHECK(l.algorithm == config::algorithm::sliding_window);
  CHECK(l.used == 8);  // ceil(7.5)
  CHECK(l.remaining == 2);
  set(f, "slide", "s", 0);
  CHECK(only(f, "slide", "s").used == 0);
  for (int i = 0; i < 10; ++i) CHECK(hit(f, "slide", "s") == code::OK);
  set(f, "slide", "s", 4);
  CHECK(only(f, "slide", "s").used == 4);
  for (int i = 0; i < 6; ++i) CHECK(hit(f, "slide", "s") == code::OK);
  CHECK(hit(f, "slide", "s") == code::OVER_LIMIT);
}

TEST_CASE("a GCRA bucket: used is what has not refilled") {
  service_fixture f(rules, {}, {}, 1'800'000'000);
  for (int i = 0; i < 6; ++i) CHECK(hit(f, "bucket", "b") == code::OK);
  auto l = only(f, "bucket", "b");
  CHECK(l.capacity == 6);
  CHECK(l.used == 6);
  CHECK(l.remaining == 0);
  CHECK(l.reset_seconds == 60);
  f.clock.advance(20);  // two refilled (one per 10 s)
  l = only(f, "bucket", "b");
  CHECK(l.used == 4);
  CHECK(l.remaining == 2);
  set(f, "bucket", "b", 0);
  CHECK(only(f, "bucket", "b").used == 0);
  set(f, "bucket", "b", 5);
  CHECK(only(f, "bucket", "b").used == 5);
  CHECK(hit(f, "bucket", "b") == code::OK);
  CHECK(hit(f, "bucket", "b") == code::OVER_LIMIT);
}

TEST_CASE("a GCRA bucket: used shows debt, reset_seconds is always until full, an untouched bucket is full") {
  service_fixture f(rules, {}, {}, 1'800'000'000);
  auto l = only(f, "tokens", "t");
  CHECK(l.used == 0);
  CHECK(l.remaining == 10);
  CHECK(l.reset_seconds == 0);
  // Usage: 15 hits on a burst of 10 (one refills per second) leave 15 to refill, 5 of them debt.
  hit(f, "tokens", "t", 15);
  l = only(f, "tokens", "t");
  CHECK(l.capacity == 10);
  CHECK(l.used == 15);
  CHECK(l.remaining == 0);
  CHECK(l.reset_seconds == 15);
  set(f, "tokens", "t", 50);
  l = only(f, "tokens", "t");
  CHECK(l.used == 50);
  CHECK(l.reset_seconds == 50);
  f.clock.advance(45);
  l = only(f, "tokens", "t");
  CHECK(l.used == 5);
  CHECK(l.remaining == 5);
  CHECK(l.reset_seconds == 5);
  // Admission, refused: reset_seconds is still until full (not until the next admission).
  for (int i = 0; i < 6; ++i) CHECK(hit(f, "bucket", "r") == code::OK);
  CHECK(hit(f, "bucket", "r") == code::OVER_LIMIT);
  l = only(f, "bucket", "r");
  CHECK(l.used == 6);
  CHECK(l.reset_seconds == 60);
}

TEST_CASE("concurrency: leases held, freed or set by the operator") {
  service_fixture f(rules, {}, {}, 1'800'000'000);
  for (int i = 0; i < 3; ++i) CHECK(hit(f, "slots", "c") == code::OK);
  CHECK(hit(f, "slots", "c") == code::OVER_LIMIT);
  auto l = only(f, "slots", "c");
  CHECK(l.used == 3);
  CHECK(l.remaining == 0);
  set(f, "slots", "c", 0);
  CHECK(only(f, "slots", "c").used == 0);
  set(f, "slots", "c", 2);
  CHECK(only(f, "slots", "c").used == 2);
  CHECK(hit(f, "slots", "c") == code::OK);
  CHECK(hit(f, "slots", "c") == code::OVER_LIMIT);
  f.clock.advance(20);  // the operator's leases end as any others do
  CHECK(only(f, "slots", "c").used == 0);
}

TEST_CASE("a reset key leaves the local over-limit cache") {
  limiter::settings ls;
  ls.local_cache_size_bytes = 1 << 20;
  service_fixture f(rules, ls);
  for (int i = 0; i < 7; ++i) hit(f, "user", "l");
  CHECK(hit(f, "user", "l") == code::OVER_LIMIT);
  CHECK(f.counter("ratelimit.service.rate_limit.ops.user.over_limit_with_local_cache") > 0);
  set(f, "user", "l", 0);
  CHECK(hit(f, "user", "l") == code::OK);
}

}  // namespace counter_control_test
