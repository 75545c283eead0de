// Sliding windows, GCRA, several limits and count_only_admitted against a fake clock: each documented bound
// is checked over adversarial and random traffic.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

// Named: unity builds put several test files in one translation unit.
namespace algorithms_test {

namespace {

constexpr std::int64_t second = 1'000'000;              // µs
constexpr std::int64_t start = 1'000'000'000 * second;  // a multiple of every window below

struct admission {
  std::int64_t at;
  std::uint64_t hits;
};

// The largest number of hits admitted in any interval [t, t + d) that starts at an admission.
std::uint64_t most_in_any(const std::vector<admission>& admitted, std::int64_t d) {
  std::uint64_t most = 0;
  for (std::size_t i = 0; i < admitted.size(); ++i) {
    std::uint64_t sum = 0;
    for (std::size_t j = i; j < admitted.size() && admitted[j].at < admitted[i].at + d; ++j)
      sum += admitted[j].hits;
    most = std::max(most, sum);
  }
  return most;
}

// Sends requests at `times` (µs), each with its hits; returns what was admitted.
std::vector<admission> run(service_fixture& f, const std::vector<admission>& requests) {
  std::vector<admission> admitted;
  for (const auto& r : requests) {
    f.clock.set_micros(r.at);
    auto req = make_request("d", {{{"k", "v"}}}, static_cast<std::uint32_t>(r.hits));
    if (f.decide(req).overall_code() == code::OK) admitted.push_back(r);
  }
  return admitted;
}

std::vector<admission> random_traffic(std::uint32_t seed, std::int64_t from, std::int64_t length,
                                      std::int64_t mean_gap, std::uint64_t max_hits) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(1.0 / static_cast<double>(mean_gap));
  std::uniform_int_distribution<std::uint64_t> hits(1, max_hits);
  std::vector<admission> out;
  for (std::int64_t t = from; t < from + length; t += 1 + static_cast<std::int64_t>(gap(rng)))
    out.push_back({t, hits(rng)});
  return out;
}

const char* sliding_rules = R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, unit_multiplier: 10, requests_per_unit: 20, algorithm: sliding_window}
)";

// L × (1 + d/W), the documented bound of a sliding window for an interval of length d ≤ W.
std::uint64_t sliding_bound(std::int64_t d) {
  return static_cast<std::uint64_t>(20.0 * (1.0 + d / (10.0 * second)));
}

}  // namespace

TEST_CASE("sliding window: a burst at the end of a window buys little of the next one") {
  for (bool only_admitted : {false, true}) {
    service::settings ss;
    ss.count_only_admitted = only_admitted;
    service_fixture f(sliding_rules, {}, ss);
    std::vector<admission> requests;
    for (int i = 0; i < 40; ++i)
      requests.push_back({start + 10 * second - 1000, 1});  // 1 ms before the boundary
    for (std::int64_t t = start + 10 * second; t < start + 30 * second; t += 50'000)
      requests.push_back({t, 1});
    auto admitted = run(f, requests);
    // A fixed window admits 40 within 2 ms here; the sliding window at most 20 × (1 + d/W).
    for (std::int64_t d : {std::int64_t{2'000}, second, 5 * second, 10 * second})
      CHECK_MESSAGE(most_in_any(admitted, d) <= sliding_bound(d), "d = ", d);
    CHECK(most_in_any(admitted, 2'000) <= 20);
    // And it does let traffic through: the next windows admit about L each.
    CHECK(admitted.size() >= 50);
  }
}

TEST_CASE("sliding window: random traffic never passes the bound, in either counting mode") {
  for (bool only_admitted : {false, true}) {
    for (std::uint32_t seed = 1; seed <= 4; ++seed) {
      service::settings ss;
      ss.count_only_admitted = only_admitted;
      service_fixture f(sliding_rules, {}, ss);
      auto admitted =
          run(f, random_traffic(seed, start + 3 * second, 60 * second, 100'000, seed == 4 ? 3 : 1));
      for (std::int64_t d : {std::int64_t{100'000}, second, 5 * second, 10 * second})
        CHECK_MESSAGE(most_in_any(admitted, d) <= sliding_bound(d), "seed ", seed, " d = ", d);
      CHECK(!admitted.empty());
    }
  }
}

TEST_CASE("sliding window: remaining counts the weighted previous window") {
  service_fixture f(sliding_rules);
  f.clock.set_micros(start + 5 * second);
  auto req = make_request("d", {{{"k", "v"}}}, 10);
  CHECK(f.decide(req).statuses(0).limit_remaining() == 10);
  f.clock.set_micros(start + 12 * second + 500'000);  // 25% into the next window: 75% of 10 weighs 8 (ceil)
  auto one = make_request("d", {{{"k", "v"}}});
  auto r = f.decide(one);
  CHECK(r.statuses(0).limit_remaining() == 20 - 8 - 1);
  CHECK(r.statuses(0).duration_until_reset().seconds() == 8);  // the window ends at +20 s
}

TEST_CASE("GCRA: burst at once, then one per emission interval; never more than burst + d/T") {
  service_fixture f(R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 5}
)");
  auto req = make_request("d", {{{"k", "v"}}});
  f.clock.set_micros(start);
  for (int i = 0; i < 5; ++i) CHECK(f.decide(req).overall_code() == code::OK);
  auto over = f.decide(req);
  CHECK(over.overall_code() == code::OVER_LIMIT);
  CHECK(over.statuses(0).duration_until_reset().seconds() == 1);
  f.clock.set_micros(start + 99'999);
  CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);
  f.clock.set_micros(start + 100'000);  // T = 1 s / 10
  auto next = f.decide(req);
  CHECK(next.overall_code() == code::OK);
  CHECK(next.statuses(0).limit_remaining() == 0);
  f.clock.set_micros(start + 10 * second);  // the bucket is full again
  CHECK(f.decide(req).statuses(0).limit_remaining() == 4);

  for (std::uint32_t seed = 1; seed <= 3; ++seed) {
    service_fixture g(R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 5}
)");
    auto admitted = run(g, random_traffic(seed, start, 30 * second, 40'000, seed == 3 ? 2 : 1));
    for (std::int64_t d : {std::int64_t{1}, std::int64_t{50'000}, std::int64_t{250'000}, second, 7 * second})
      CHECK_MESSAGE(most_in_any(admitted, d) <= static_cast<std::uint64_t>(5 + d / 100'000), "seed ", seed,
                    " d ", d);
    // Over 30 s at ~25 requests/s offered, about 10/s get through.
    std::uint64_t total = 0;
    for (const auto& a : admitted) total += a.hits;
    CHECK(total >= 290);
    CHECK(total <= 305);
  }
}

TEST_CASE("GCRA without burst holds requests_per_unit; a rejected request moves nothing") {
  service_fixture f(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: "
      "gcra}\n");
  auto req = make_request("d", {{{"k", "v"}}});
  f.clock.set_micros(start);
  for (int i = 0; i < 3; ++i) CHECK(f.decide(req).overall_code() == code::OK);
  for (int i = 0; i < 50; ++i) CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);
  f.clock.set_micros(start + 20 * second);  // one emission interval later: exactly one more
  CHECK(f.decide(req).overall_code() == code::OK);
  CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);
}

TEST_CASE("several limits: every one counts, the status shows the closest, stats per limit") {
  const char* rules = R"(domain: d
descriptors:
  - key: k
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 5}
)";
  for (bool only_admitted : {false, true}) {
    service::settings ss;
    ss.count_only_admitted = only_admitted;
    service_fixture f(rules, {}, ss);
    auto req = make_request("d", {{{"k", "v"}}});
    f.clock.set_micros(start);
    auto first = f.decide(req);
    CHECK(first.statuses(0).limit_remaining() == 1);  // the second's 1 left, not the minute's 4
    CHECK(first.statuses(0).current_limit().unit() == code::RateLimit::SECOND);
    CHECK(f.decide(req).overall_code() == code::OK);
    CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);  // third in the second
    f.clock.set_micros(start + second);
    CHECK(f.decide(req).overall_code() == code::OK);
    CHECK(f.decide(req).overall_code() == code::OK);
    f.clock.set_micros(start + 2 * second);
    // Upstream's counting spent the rejected third hit on the minute too (5 of 5); count_only_admitted did
    // not.
    auto r = f.decide(req);
    CHECK(r.overall_code() == (only_admitted ? code::OK : code::OVER_LIMIT));
    auto last = f.decide(req);
    CHECK(last.overall_code() == code::OVER_LIMIT);
    CHECK(last.statuses(0).current_limit().unit() == code::RateLimit::MINUTE);
    CHECK(f.counter("ratelimit.service.rate_limit.d.k.second.over_limit") == 1);
    CHECK(f.counter("ratelimit.service.rate_limit.d.k.minute.total_hits") == 7);
  }
}

TEST_CASE("count_only_admitted: a rejected request changes no counter, with hits_addend and negative hits") {
  const char* rules = R"(domain: d
descriptors:
  - key: a
    count_only_admitted: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: c
    rate_limit: {unit: hour, requests_per_unit: 1}
)";
  service_fixture f(rules);
  auto remaining_b = [&] {
    auto check = make_request("d", {{{"b", "x"}}});
    check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
    return f.decide(check).statuses(0).limit_remaining();
  };
  CHECK(f.decide(make_request("d", {{{"a", "x"}}, {{"b", "x"}}}, 3)).overall_code() == code::OVER_LIMIT);
  CHECK(remaining_b() == 10);  // a's 3 hits were over its 1: b spent nothing
  CHECK(f.decide(make_request("d", {{{"a", "x"}}, {{"b", "x"}}})).overall_code() == code::OK);
  CHECK(remaining_b() == 9);
  CHECK(f.decide(make_request("d", {{{"a", "x"}}, {{"b", "x"}}})).overall_code() == code::OVER_LIMIT);
  CHECK(remaining_b() == 9);
  // Hits given back in a rejected request are not given back either.
  auto give_back = make_request("d", {{{"a", "x"}}, {{"b", "x"}}});
  give_back.mutable_descriptors(1)->set_is_negative_hits(true);
  CHECK(f.decide(give_back).overall_code() == code::OVER_LIMIT);
  CHECK(remaining_b() == 9);
  give_back.mutable_descriptors()->DeleteSubrange(0, 1);
  CHECK(f.decide(give_back).overall_code() == code::OK);
  CHECK(remaining_b() == 10);
  // Without a count_only_admitted rule in the request, upstream's counting: c over, b still counted.
  CHECK(f.decide(make_request("d", {{{"c", "x"}}, {{"b", "x"}}}, 2)).overall_code() == code::OVER_LIMIT);
  CHECK(remaining_b() == 8);
}

TEST_CASE("count_only_admitted: a limit that is not enforced never holds back the others") {
  // The batch applies exactly when the request is admitted: a shadow-mode limit over its limit, or one quota
  // descriptor over while another has room, leaves the request admitted, so everything that admits counts.
  const char* rules = R"(domain: d
descriptors:
  - key: shadow
    shadow_mode: true
    count_only_admitted: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: gcra}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: q1
    quota_mode: true
    count_only_admitted: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: sliding_window}
)";
  service_fixture f(rules);
  auto remaining = [&](const char* key) {
    auto check = make_request("d", {{{key, "x"}}});
    check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
    return f.decide(check).statuses(0).limit_remaining();
  };
  SUBCASE("shadow mode") {
    for (int i = 0; i < 5; ++i) {
      const auto r = f.decide(make_request("d", {{{"shadow", "x"}}, {{"ip", "x"}}}));
      CHECK(r.overall_code() == code::OK);
      CHECK(r.statuses(0).code() == code::OK);  // shadow mode: over, but not enforced
    }
    CHECK(remaining("ip") == 95);  // every admitted request counted, though the shadow limit was over
    CHECK(f.counter("ratelimit.service.rate_limit.d.shadow.shadow_mode") == 4);
  }
  SUBCASE("quota mode") {
    auto both = [&] { return f.decide(make_request("d", {{{"q1", "x"}}, {{"q2", "x"}}, {{"ip", "x"}}})); };
    CHECK(both().overall_code() == code::OK);  // both quotas had room
    auto second = both();                      // q1 over, q2 has room: admitted
    CHECK(second.overall_code() == code::OK);
    CHECK(second.statuses(0).code() == code::OVER_LIMIT);
    CHECK(remaining("ip") == 98);
    CHECK(remaining("q2") == 0);
    auto third = both();  // every quota over: refused, nothing consumed
    CHECK(third.overall_code() == code::OVER_LIMIT);
    CHECK(third.statuses(2).limit_remaining() == 98);
    CHECK(remaining("ip") == 98);
    // q1's fixed window counted its over hit in the admitted request (as independent counting would), not in
    // the refused one.
    CHECK(f.counter("ratelimit.service.rate_limit.d.q1.total_hits") == 3);
  }
  SUBCASE("QUOTA_MODE: a descriptor without a rule is a quota descriptor that is never over") {
    service::settings ss;
    ss.global_quota_mode = true;
    service_fixture g(rules, {}, ss);
    CHECK(g.decide(make_request("d", {{{"q1", "x"}}})).overall_code() == code::OK);
    CHECK(g.decide(make_request("d", {{{"q1", "x"}}})).overall_code() == code::OVER_LIMIT);  // alone: refused
    CHECK(g.counter("ratelimit.service.rate_limit.d.q1.total_hits") == 2);
    auto r = g.decide(make_request("d", {{{"q1", "x"}}, {{"nowhere", "x"}}, {{"ip", "x"}}}));
    CHECK(r.overall_code() == code::OK);
    CHECK(r.statuses(2).limit_remaining() == 99);  // counted: the request was admitted
  }
}

}  // namespace algorithms_test
