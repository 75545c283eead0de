// `accounting: usage` on the memory backend against a fake clock: reported hits always count, past the limit
// too (debt), for every algorithm; a check of 0 hits sees a spent budget; the debt recovers as time passes.
#include <doctest/doctest.h>

#include <string>

#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

// Named: unity builds put several test files in one translation unit.
namespace usage_accounting_test {

namespace {

constexpr std::int64_t second = 1'000'000;              // µs
constexpr std::int64_t start = 1'000'000'040 * second;  // 20 s into a minute

std::string rules(const std::string& options, const std::string& extra = "") {
  return "domain: ai\ndescriptors:\n  - key: tenant\n" + extra +
         "    rate_limit: {unit: minute, requests_per_unit: 100" + options + "}\n";
}

struct verdict {
  code::Code status;
  std::uint32_t remaining;
  std::int64_t reset;
};

// One descriptor tenant=t with `hits` (0: a check), given back when `negative`.
verdict send(service_fixture& f, std::uint64_t hits, bool negative = false) {
  auto req = make_request("ai", {{{"tenant", "t"}}});
  req.mutable_descriptors(0)->mutable_hits_addend()->set_value(hits);
  req.mutable_descriptors(0)->set_is_negative_hits(negative);
  const auto r = f.decide(req);
  return {r.statuses(0).code(), r.statuses(0).limit_remaining(),
          r.statuses(0).duration_until_reset().seconds()};
}

const char* const algorithms[] = {"", ", algorithm: sliding_window", ", algorithm: gcra"};

}  // namespace

TEST_CASE("usage: a report past the budget counts, and checks see it spent until it recovers") {
  for (const char* algorithm : algorithms) {
    CAPTURE(algorithm);
    service_fixture f(rules(std::string(algorithm) + ", accounting: usage"));
    f.clock.set_micros(start);
    CHECK(send(f, 0).status == code::OK);
    CHECK(send(f, 0).remaining == 100);
    // An LLM call reports 150 tokens after the response: more than the whole budget, all counted.
    CHECK(send(f, 150).status == code::OVER_LIMIT);
    CHECK(f.counter("ratelimit.service.rate_limit.ai.tenant.total_hits") == 150);
    const auto spent = send(f, 0);
    CHECK(spent.status == code::OVER_LIMIT);
    CHECK(spent.remaining == 0);
    CHECK(send(f, 1).status == code::OVER_LIMIT);  // the next request's estimate too (and it counts)
  }
}

TEST_CASE("usage: the debt of each algorithm and when it is paid") {
  SUBCASE("fixed window: until the window ends, as upstream counts") {
    service_fixture f(rules(", accounting: usage"));
    f.clock.set_micros(start);
    send(f, 150);
    const auto v = send(f, 0);
    CHECK(v.status == code::OVER_LIMIT);
    CHECK(v.reset == 40);
    f.clock.set_micros(start + 39 * second);
    CHECK(send(f, 0).status == code::OVER_LIMIT);
    f.clock.set_micros(start + 40 * second);  // a new minute
    CHECK(send(f, 0).remaining == 100);
  }
  SUBCASE("sliding window: the 150 weigh on the next window until fewer than 100 remain of them") {
    service_fixture f(rules(", algorithm: sliding_window, accounting: usage"));
    f.clock.set_micros(start);
    send(f, 150);
    // The next minute begins at start + 40 s; a check admits once ceil(150 × (60 − e) / 60) + 1 ≤ 100,
    // e ≥ 20.4 s.
    f.clock.set_micros(start + 40 * second + 20 * second);
    CHECK(send(f, 0).status == code::OVER_LIMIT);
    f.clock.set_micros(start + 40 * second + 20'500'000);
    const auto v = send(f, 0);
    CHECK(v.status == code::OK);
    CHECK(v.remaining == 1);  // ceil(150 × 39.5 / 60) = 99
  }
  SUBCASE("gcra: the arrival time moves 150 intervals on, and a hit fits once it is within the burst") {
    service_fixture f(rules(", algorithm: gcra, accounting: usage"));
    f.clock.set_micros(start);
    send(f, 150);  // TAT = start + 150 × 0.6 s = start + 90 s; tolerance 60 s
    const auto v = send(f, 0);
    CHECK(v.status == code::OVER_LIMIT);
    CHECK(v.reset == 31);  // one hit fits at TAT + 0.6 s − 60 s = start + 30.6 s
    f.clock.set_micros(start + 30 * second);
    CHECK(send(f, 0).status == code::OVER_LIMIT);
    f.clock.set_micros(start + 31 * second);
    const auto later = send(f, 0);
    CHECK(later.status == code::OK);
    CHECK(later.remaining == 1);  // (31 + 60 − 90) s / 0.6 s
  }
}

TEST_CASE("admission (the default) counts none of a refused report on sliding windows and GCRA") {
  for (const char* algorithm : {", algorithm: sliding_window", ", algorithm: gcra"}) {
    CAPTURE(algorithm);
    service_fixture f(rules(algorithm));
    f.clock.set_micros(start);
    CHECK(send(f, 150).status == code::OVER_LIMIT);
    CHECK(send(f, 0).status == code::OK);  // the 150 tokens spent are not counted: what usage fixes
    CHECK(send(f, 0).remaining == 100);
  }
}

TEST_CASE("usage: an estimate before and the difference after settle exactly") {
  for (const char* algorithm : algorithms) {
    CAPTURE(algorithm);
    service_fixture f(rules(std::string(algorithm) + ", accounting: usage"));
    f.clock.set_micros(start);
    CHECK(send(f, 50).status == code::OK);        // reserve an estimate of 50
    CHECK(send(f, 20, true).status == code::OK);  // the call used 30: 20 given back
    CHECK(send(f, 0).remaining == 70);
    CHECK(send(f, 90).status == code::OVER_LIMIT);  // the next estimate is too high, and reserved anyway
    CHECK(send(f, 0).status == code::OVER_LIMIT);
    CHECK(send(f, 60, true).status == code::OK);  // it used 30
    CHECK(send(f, 0).remaining == 40);
    CHECK(f.counter("ratelimit.service.rate_limit.ai.tenant.total_negative_hits") == 80);
  }
}

TEST_CASE("usage: every limit of rate_limits counts, unit_multiplier windows, shadow mode answers OK") {
  service_fixture f(R"(domain: ai
descriptors:
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 100, accounting: usage, algorithm: gcra}
      - {unit: hour, unit_multiplier: 2, requests_per_unit: 1000, accounting: usage}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10, accounting: usage, algorithm: sliding_window}
)");
  const std::int64_t two_hours = (start / (7200 * second) + 1) * 7200 * second;  // a window's start
  f.clock.set_micros(two_hours);
  CHECK(send(f, 900).status == code::OVER_LIMIT);  // over the minute's budget, within the two hours'
  f.clock.set_micros(two_hours + 600 * second);    // the minute's debt (540 s) is paid
  const auto v = send(f, 0);
  CHECK(v.status == code::OK);
  CHECK(v.remaining == 100);                       // both have 100 left
  CHECK(send(f, 150).status == code::OVER_LIMIT);  // 1050 of the two hours' 1000
  f.clock.set_micros(two_hours + 3600 * second);
  CHECK(send(f, 0).status == code::OVER_LIMIT);  // the minute is fine again, the two hours are still spent
  auto shadow = make_request("ai", {{{"shadow", "s"}}});
  shadow.mutable_descriptors(0)->mutable_hits_addend()->set_value(25);
  CHECK(f.decide(shadow).overall_code() == code::OK);
  CHECK(f.counter("ratelimit.service.rate_limit.ai.shadow.shadow_mode") == 15);
  shadow.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  CHECK(f.decide(shadow).overall_code() == code::OK);
  CHECK(f.counter("ratelimit.service.rate_limit.ai.shadow.over_limit") == 15);
}

TEST_CASE(
    "usage counts past the local over-limit cache, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT and a refused "
    "all-or-nothing request") {
  const char* two = R"(domain: ai
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100, accounting: usage}
  - key: gate
    rate_limit: {unit: minute, requests_per_unit: 1}
)";
  auto both = [](std::uint64_t hits) {
    auto req = make_request("ai", {{{"gate", "g"}}, {{"tenant", "t"}}});
    req.mutable_descriptors(1)->mutable_hits_addend()->set_value(hits);
    return req;
  };
  SUBCASE("local cache and STOP mode") {
    limiter::settings ls;
    ls.local_cache_size_bytes = 1;
    ls.stop_cache_key_increment_when_overlimit = true;
    service_fixture f(two, ls);
    f.clock.set_micros(start);
    f.decide(both(0));
    f.decide(both(0));  // the gate over: now in the local cache
    // STOP mode counts no other key of a request the local cache knows is over; usage it still counts.
    CHECK(f.decide(both(5)).overall_code() == code::OVER_LIMIT);
    CHECK(f.counter("ratelimit.service.rate_limit.ai.gate.over_limit_with_local_cache") == 1);
    send(f, 150);
    send(f, 10);  // over: usage never goes into the local over-limit cache, it must reach the store
    limiter::counter_op op;
    op.key = "ai_tenant_t_1000000020";
    limiter::op_result stored;
    struct noop final : limiter::completion {
      void complete(const limiter::backend_error*) noexcept override {}
    } done;
    f.backend.get({&op, 1}, {&stored, 1}, done);
    CHECK(stored.value == 165);
  }
  SUBCASE("COUNT_ONLY_ADMITTED") {
    service::settings ss;
    ss.count_only_admitted = true;
    service_fixture f(two, {}, ss);
    f.clock.set_micros(start);
    CHECK(f.decide(both(40)).overall_code() == code::OK);
    CHECK(f.decide(both(40)).overall_code() == code::OVER_LIMIT);  // the gate refuses: only usage counts
    CHECK(send(f, 0).remaining == 20);
    auto gate = make_request("ai", {{{"gate", "g"}}});
    gate.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
    CHECK(f.decide(gate).statuses(0).limit_remaining() == 0);
  }
}

TEST_CASE("accounting: bad values and count_only_admitted are refused at load") {
  auto error = [](const std::string& yaml) {
    stats::store stats;
    std::vector<config::config_file> files{{"budgets.yaml", yaml}};
    auto r = config::load_rules(files, false, stats);
    return r.rules ? "" : r.error;
  };
  CHECK(error(rules(", accounting: spent")) ==
        "budgets.yaml: unknown accounting 'spent' (expected admission or usage)");
  CHECK(error(rules(", accounting: usage", "    count_only_admitted: true\n")) ==
        "budgets.yaml: rule 'ai.tenant': count_only_admitted counts only admitted requests, but accounting: "
        "usage "
        "counts every hit reported; choose one");
  CHECK(
      error("domain: ai\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, accounting: usage}\n") ==
      "budgets.yaml: an unlimited rate_limit takes no algorithm, unit_multiplier, accounting or time_zone");
  stats::store stats;
  auto set = test::compile_rules(rules(", accounting: admission"), stats);
  CHECK(set != nullptr);
}

TEST_CASE(
    "usage in quota mode: counted past its limit; the request is refused only when every quota is spent") {
  service_fixture f(R"(domain: ai
descriptors:
  - key: tenant
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 100, accounting: usage}
  - key: pool
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
)");
  f.clock.set_micros(start);
  auto both = make_request("ai", {{{"tenant", "t"}}, {{"pool", "p"}}});
  both.mutable_descriptors(0)->mutable_hits_addend()->set_value(150);
  CHECK(f.decide(both).overall_code() == code::OK);  // the pool still has room
  CHECK(send(f, 0).status == code::OVER_LIMIT);      // the tenant's 150 counted all the same
  both.mutable_descriptors(1)->mutable_hits_addend()->set_value(2000);
  CHECK(f.decide(both).overall_code() == code::OVER_LIMIT);  // both spent
  CHECK(f.counter("ratelimit.service.rate_limit.ai.tenant.total_hits") == 300);
}

}  // namespace usage_accounting_test
