// The rule keys beyond upstream: how they load, what check-config says about bad ones, and the keys and
// stats they count under.
#include <doctest/doctest.h>

#include "core/strings.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/limiter/cache_key.hpp"
#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

namespace {

std::string load_error(const std::string& descriptor) {
  stats::store stats;
  std::vector<config::config_file> files{
      {"rules.yaml", "domain: d\ndescriptors:\n  - key: k\n" + descriptor}};
  auto r = config::load_rules(files, false, stats);
  return r.rules ? "" : r.error;
}

}  // namespace

TEST_CASE("bad new keys are refused with a message that names them") {
  CHECK(load_error("    rate_limit: {unit: second, requests_per_unit: 5, algorithm: leaky}\n") ==
        "rules.yaml: unknown algorithm 'leaky' (expected fixed_window, sliding_window, gcra or concurrency)");
  CHECK(load_error("    rate_limit: {unit: second, requests_per_unit: 5, burst: 3}\n") ==
        "rules.yaml: burst is only meaningful with algorithm: gcra");
  CHECK(load_error(
            "    rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding_window, burst: 3}\n") ==
        "rules.yaml: burst is only meaningful with algorithm: gcra");
  CHECK(load_error("    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra, burst: 0}\n") ==
        "rules.yaml: burst must be at least 1");
  CHECK(load_error("    rate_limit: {unit: minute, requests_per_unit: 5, unit_multiplier: 0}\n") ==
        "rules.yaml: unit_multiplier must be at least 1");
  CHECK(load_error("    rate_limit: {unit: minute, requests_per_unit: 5, unit_multiplier: -1}\n") ==
        "rules.yaml: error loading config file: unit_multiplier: cannot unmarshal '-1' into uint32");
  CHECK(load_error("    rate_limit: {unit: year, requests_per_unit: 5, unit_multiplier: 11}\n") ==
        "rules.yaml: unit_multiplier: a window of 11 year is longer than 3650 days");
  CHECK(load_error("    rate_limit: {unit: second, requests_per_unit: 0, algorithm: gcra}\n") ==
        "rules.yaml: algorithm gcra needs requests_per_unit of at least 1");
  CHECK(load_error("    rate_limit: {unlimited: true, algorithm: gcra}\n") ==
        "rules.yaml: an unlimited rate_limit takes no algorithm, unit_multiplier, accounting or time_zone");
  CHECK(load_error("    near_limit_ratio: 1.5\n    rate_limit: {unit: second, requests_per_unit: 5}\n") ==
        "rules.yaml: near_limit_ratio: '1.5' is not a number from 0 to 1");
  CHECK(load_error("    near_limit_ratio: many\n    rate_limit: {unit: second, requests_per_unit: 5}\n") ==
        "rules.yaml: near_limit_ratio: 'many' is not a number from 0 to 1");
  CHECK(load_error("    near_limit_ratio: 0.5\n") ==
        "rules.yaml: near_limit_ratio needs a rate_limit or rate_limits");
  CHECK(load_error("    rate_limits: {unit: second, requests_per_unit: 5}\n") ==
        "rules.yaml: error loading config file: rate_limits: expected a list");
  CHECK(load_error("    rate_limits:\n      - {unlimited: true}\n") ==
        "rules.yaml: rate_limits: an unlimited limit belongs in rate_limit");
  CHECK(
      load_error("    rate_limits:\n      - {unit: second, requests_per_unit: 5}\n"
                 "      - {unit: second, requests_per_unit: 9}\n") ==
      "rules.yaml: rate_limits of 'd.k': two limits are named 'second' in stats (give one a different name)");
  CHECK(load_error("    rate_limits:\n      - {unit: second, requests_per_unit: 5, name: a}\n"
                   "      - {unit: second, requests_per_unit: 9, name: b}\n") ==
        "rules.yaml: rate_limits of 'd.k': two limits count the same 1-second window with fixed_window (only "
        "the lower one could ever apply)");
  CHECK(
      load_error("    count_only_admitted: maybe\n    rate_limit: {unit: second, requests_per_unit: 5}\n") ==
      "rules.yaml: error loading config file: count_only_admitted: cannot unmarshal 'maybe' into bool");
  // What upstream accepts still loads, and the new keys load beside it.
  CHECK(load_error("    rate_limit: {unit: second, requests_per_unit: 5}\n") == "");
  CHECK(
      load_error("    near_limit_ratio: 0.5\n    count_only_admitted: true\n"
                 "    rate_limit: {unit: minute, requests_per_unit: 5, unit_multiplier: 5}\n"
                 "    rate_limits:\n      - {unit: second, requests_per_unit: 2, algorithm: gcra, burst: 4}\n"
                 "      - {unit: day, requests_per_unit: 100, algorithm: sliding_window}\n") == "");
}

TEST_CASE("a limit upstream cannot express has a key that no upstream key can equal") {
  std::string key;
  std::vector<config::entry> one{{"key", "value"}};
  limiter::build_tagged_key(key, {"p:", "domain", one, {}}, 1200, "300s_fixed");
  CHECK(key == "{p:domain_key_value_}1200_300s_fixed");
  limiter::build_tagged_key(key, {"", "domain", one, {}}, std::nullopt, "60s_gcra");
  CHECK(key == "{domain_key_value_}60s_gcra");
  // Upstream keys end in "_<digits>"; these end in a letter.
  CHECK(!std::isdigit(static_cast<unsigned char>(key.back())));
}

TEST_CASE(
    "configured limits are gauges; several limits have stats of their own; /rlconfig shows the options") {
  service_fixture f(R"(domain: d
descriptors:
  - key: k
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 50, unit_multiplier: 5, algorithm: sliding_window}
      - {unit: day, requests_per_unit: 1000, name: daily, algorithm: gcra, burst: 10}
)");
  CHECK(f.stats.get_gauge("ratelimit.service.rate_limit.d.k.second.limit").value() == 2);
  CHECK(f.stats.get_gauge("ratelimit.service.rate_limit.d.k.second.window_seconds").value() == 1);
  CHECK(f.stats.get_gauge("ratelimit.service.rate_limit.d.k.5_minute_sliding.limit").value() == 50);
  CHECK(f.stats.get_gauge("ratelimit.service.rate_limit.d.k.5_minute_sliding.window_seconds").value() == 300);
  CHECK(f.stats.get_gauge("ratelimit.service.rate_limit.d.k.daily.limit").value() == 1000);
  f.decide(make_request("d", {{{"k", "v"}}}));
  for (auto name : {"second", "5_minute_sliding", "daily"})
    CHECK(f.counter(core::cat("ratelimit.service.rate_limit.d.k.", name, ".total_hits")) == 1);

  stats::store stats;
  auto rules = test::compile_rules(R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5, unit_multiplier: 5, algorithm: gcra, burst: 2}
)",
                                   stats);
  CHECK(rules->dump() ==
        "d.k: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false, algorithm: gcra, "
        "unit_multiplier: 5, burst: 2\n");
}

TEST_CASE("unit_multiplier: epoch-aligned windows of N units") {
  // 1'000'000'020 is 20 s into a 5-minute window (1'000'000'000 = 300 × 3'333'333 + 100): 200 s remain.
  service_fixture f(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 3, "
      "unit_multiplier: 5}\n");
  auto req = make_request("d", {{{"k", "v"}}});
  for (int i = 0; i < 3; ++i) CHECK(f.decide(req).overall_code() == code::OK);
  auto over = f.decide(req);
  CHECK(over.overall_code() == code::OVER_LIMIT);
  CHECK(over.statuses(0).duration_until_reset().seconds() == 300 - 1'000'000'020 % 300);
  f.clock.advance(over.statuses(0).duration_until_reset().seconds() - 1);
  CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);
  f.clock.advance(1);
  CHECK(f.decide(req).overall_code() == code::OK);
}

TEST_CASE("near_limit_ratio per rule replaces NEAR_LIMIT_RATIO for its limits") {
  service_fixture f(R"(domain: d
descriptors:
  - key: k
    near_limit_ratio: 0.5
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: j
    rate_limit: {unit: hour, requests_per_unit: 10}
)");
  for (int i = 0; i < 7; ++i) {
    f.decide(make_request("d", {{{"k", "v"}}}));
    f.decide(make_request("d", {{{"j", "v"}}}));
  }
  CHECK(f.counter("ratelimit.service.rate_limit.d.k.near_limit") == 2);  // hits 6 and 7 (near 5)
  CHECK(f.counter("ratelimit.service.rate_limit.d.j.near_limit") == 0);  // near 8
}
