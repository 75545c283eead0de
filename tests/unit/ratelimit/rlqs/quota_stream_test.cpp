// StreamRateLimitQuotas end to end on one stream, before any plan: the domain bound at the first message, the
// first report of each bucket answered at once (bucket_id echoed, a token bucket within the rule's budget or
// a blanket rule), the per-stream and per-connection bounds, unreadable messages, the report counters.

#include <doctest/doctest.h>

#include "quota_fixture.hpp"

using namespace sluice::test::rlqs_support;
using envoy::type::v3::RateLimitStrategy;

TEST_CASE("the first message of a stream must name its domain: INVALID_ARGUMENT") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("", {{{{"tenant", "acme"}}, 1}}));
  auto& r = f.client.at(id);
  CHECK(grpc_status(r) == "3");
  CHECK(grpc_message(r).find("domain") != std::string::npos);
  CHECK(r.closed);
  CHECK(responses(r.body).empty());
}

TEST_CASE("a later message may leave the domain out, but not name another one") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"tenant", "a"}}, 1}}));
  CHECK(actions_for(f.body(id), {{"tenant", "a"}}).size() == 1);

  f.send(id, reports("", {{{{"tenant", "b"}}, 1}}));  // Envoy names it every time, A77 clients only first
  CHECK(actions_for(f.body(id), {{"tenant", "b"}}).size() == 1);
  CHECK_FALSE(f.client.at(id).closed);

  f.send(id, reports("quota", {{{{"tenant", "c"}}, 1}}));  // the same one again is fine
  CHECK(actions_for(f.body(id), {{"tenant", "c"}}).size() == 1);

  f.send(id, reports("other", {{{{"tenant", "d"}}, 1}}));
  auto& r = f.client.at(id);
  CHECK(grpc_status(r) == "3");
  CHECK(grpc_message(r).find("other") != std::string::npos);
  CHECK(r.closed);
  CHECK(actions_for(f.body(id), {{"tenant", "d"}}).empty());
}

TEST_CASE(
    "a bucket's first report is answered at once, with its bucket_id and a token bucket within budget") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"tenant", "acme"}}, 3, 1}}));
  auto got = responses(f.body(id));
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].bucket_action_size() == 1);
  const auto& a = got[0].bucket_action(0);
  CHECK(bucket_of(a) == bucket{{"tenant", "acme"}});
  REQUIRE(a.has_quota_assignment_action());
  CHECK(a.quota_assignment_action().assignment_time_to_live().seconds() == 6);  // RLQS_ASSIGNMENT_TTL
  // tenant: 60 per minute, budget 1/s. Unmeasured, the client counts as wanting the whole budget: fleet {1};
  // need max(1 × 1.1, 0.05) = 1.1 over a budget of 1 → level 1 → share 1/s = 60 per window;
  // floor(60 × 0.01) = 0, under one token (a share under 100 per window): max_tokens 1 and the whole refill;
  // fill 60 s; tokens_per_fill = floor(60 / 60 × 60) = 60.
  const auto tb = token_bucket_of(a);
  REQUIRE(tb);
  CHECK(*tb == bucket_numbers{1, 60, 60});
  // Within the share per window but for the one request such a small share may admit over it: 1 + 60 = 61.
  CHECK(tb->max_tokens + static_cast<double>(tb->tokens_per_fill) / tb->fill_seconds * 60 <= 60 + 1);

  SUBCASE("later reports of the bucket are not answered (only a plan pushes)") {
    f.clock.advance(1);
    f.send(id, reports("quota", {{{{"tenant", "acme"}}, 50, 10}}));
    CHECK(responses(f.body(id)).size() == 1);
  }
  SUBCASE("a per-second rule") {
    // fast: 100/s; the report is 0/0, so the client is idle (demand 0): need max(0 × 1.1, 100 × 0.05 / 1) =
    // 5, under the budget: 5 + the surplus 95 = share 100/s = 100 per 1 s window; max_tokens = floor(100 ×
    // 0.01) = 1; fill 60 s; tokens_per_fill = floor((100 - 1) / 1 × 60) = 5940: 1 + 5940 / 60 = 100 per
    // second.
    f.send(id, reports("", {{{{"fast", "x"}}, 0}}));
    const auto fast = actions_for(f.body(id), {{"fast", "x"}});
    REQUIRE(fast.size() == 1);
    CHECK(token_bucket_of(fast[0]) == bucket_numbers{1, 5940, 60});
  }
  SUBCASE("several new buckets in one message: one answer with an action for each; known ones are left out") {
    f.send(id, reports("", {{{{"tenant", "acme"}}, 1}, {{{"tenant", "b1"}}, 1}, {{{"tenant", "b2"}}, 1}}));
    got = responses(f.body(id));
    REQUIRE(got.size() == 2);
    REQUIRE(got[1].bucket_action_size() == 2);
    CHECK(bucket_of(got[1].bucket_action(0)) == bucket{{"tenant", "b1"}});
    CHECK(bucket_of(got[1].bucket_action(1)) == bucket{{"tenant", "b2"}});
  }
  SUBCASE("a bucket_id with several pairs comes back as sent") {
    f.send(id, reports("", {{{{"z", "1"}, {"a", "2"}, {"m", "3"}}, 1}}));
    const auto multi = actions_for(f.body(id), {{"a", "2"}, {"m", "3"}, {"z", "1"}});
    REQUIRE(multi.size() == 1);
    CHECK(blanket_of(multi[0]) == RateLimitStrategy::ALLOW_ALL);  // no rule for a.m.z
  }
}

TEST_CASE("blanket rules: unlimited, shadow mode and no rule allow all; requests_per_unit 0 denies all") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"free", "x"}}, 1},
                               {{{"blocked", "x"}}, 1},
                               {{{"shadow", "x"}}, 1},
                               {{{"nomatch", "x"}}, 1},
                               {{{"tenant", "x"}, {"extra", "y"}}, 1}}));  // no rule for extra.tenant
  const auto got = responses(f.body(id));
  REQUIRE(got.size() == 1);
  CHECK(got[0].bucket_action_size() == 5);
  auto only = [&](const bucket& b) {
    const auto a = actions_for(f.body(id), b);
    REQUIRE(a.size() == 1);
    CHECK(a[0].quota_assignment_action().assignment_time_to_live().seconds() == 6);
    return blanket_of(a[0]);
  };
  CHECK(only({{"free", "x"}}) == RateLimitStrategy::ALLOW_ALL);
  CHECK(only({{"blocked", "x"}}) == RateLimitStrategy::DENY_ALL);
  CHECK(only({{"shadow", "x"}}) == RateLimitStrategy::ALLOW_ALL);
  CHECK(only({{"nomatch", "x"}}) == RateLimitStrategy::ALLOW_ALL);
  CHECK(only({{"tenant", "x"}, {"extra", "y"}}) == RateLimitStrategy::ALLOW_ALL);

  SUBCASE("a domain without rules allows all") {
    const auto other = f.open();
    f.send(other, reports("elsewhere", {{{{"tenant", "x"}}, 1}}));
    const auto a = actions_for(f.body(other), {{"tenant", "x"}});
    REQUIRE(a.size() == 1);
    CHECK(blanket_of(a[0]) == RateLimitStrategy::ALLOW_ALL);
  }
}

TEST_CASE("no rules loaded yet: everything is allowed") {
  quota_fixture f(test_settings(), false);
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"blocked", "x"}}, 1}}));
  const auto a = actions_for(f.body(id), {{"blocked", "x"}});
  REQUIRE(a.size() == 1);
  CHECK(blanket_of(a[0]) == RateLimitStrategy::ALLOW_ALL);
}

TEST_CASE("RLQS_MAX_BUCKETS_PER_STREAM: one bucket more ends the stream with RESOURCE_EXHAUSTED") {
  auto s = test_settings();
  s.max_buckets_per_stream = 3;
  quota_fixture f(s);
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"tenant", "1"}}, 1}, {{{"tenant", "2"}}, 1}, {{{"tenant", "3"}}, 1}}));
  CHECK(responses(f.body(id)).size() == 1);
  f.send(id, reports("quota", {{{{"tenant", "1"}}, 1}, {{{"tenant", "3"}}, 1}}));  // known ones: fine
  CHECK_FALSE(f.client.at(id).closed);

  f.send(id, reports("quota", {{{{"tenant", "2"}}, 1}, {{{"tenant", "4"}}, 1}}));
  auto& r = f.client.at(id);
  CHECK(grpc_status(r) == "8");
  CHECK(grpc_message(r).find("RLQS_MAX_BUCKETS_PER_STREAM") != std::string::npos);
  CHECK(r.closed);
  CHECK(actions_for(r.body, {{"tenant", "4"}}).empty());

  SUBCASE("the bound is per stream") {
    const auto other = f.open();
    f.send(other, reports("quota", {{{{"tenant", "4"}}, 1}, {{{"tenant", "5"}}, 1}, {{{"tenant", "6"}}, 1}}));
    CHECK(responses(f.body(other)).size() == 1);
    CHECK_FALSE(f.client.at(other).closed);
  }
}

TEST_CASE("RLQS_MAX_STREAMS_PER_CONNECTION: one stream more is refused; a closed one makes room") {
  auto s = test_settings();
  s.max_streams_per_connection = 2;
  quota_fixture f(s);
  const auto a = f.open();
  f.send(a, reports("quota", {{{{"tenant", "a"}}, 1}}));
  const auto b = f.open();
  f.send(b, reports("quota", {{{{"tenant", "b"}}, 1}}));
  const auto c = f.open();
  f.send(c, reports("quota", {{{{"tenant", "c"}}, 1}}));
  CHECK(grpc_status(f.client.at(c)) == "8");
  CHECK(grpc_message(f.client.at(c)).find("RLQS_MAX_STREAMS_PER_CONNECTION") != std::string::npos);
  CHECK_FALSE(f.client.at(a).closed);
  CHECK_FALSE(f.client.at(b).closed);

  f.send(a, "", true);  // half-close: the stream ends with OK
  CHECK(grpc_status(f.client.at(a)) == "0");
  CHECK(f.client.at(a).closed);
  const auto d = f.open();
  f.send(d, reports("quota", {{{{"tenant", "d"}}, 1}}));
  CHECK(actions_for(f.body(d), {{"tenant", "d"}}).size() == 1);
  CHECK_FALSE(f.client.at(d).closed);
}

TEST_CASE("a message that is not a RateLimitQuotaUsageReports ends the stream with INTERNAL") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, sluice::test::h2_client::frame(std::string("\x0a\xff", 2)));  // field 1, a cut-off length
  CHECK(grpc_status(f.client.at(id)) == "13");
  CHECK(f.client.at(id).closed);
}

TEST_CASE("reports are counted: messages, and allowed/denied per rule") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"tenant", "acme"}}, 5, 2}, {{{"free", "x"}}, 4, 0}}));
  f.send(id, reports("quota", {{{{"tenant", "acme"}}, 3, 1}}));
  f.send(id, reports("quota", {}));  // an empty report is a report
  CHECK(f.counter("ratelimit.rlqs.reports") == 3);
  CHECK(f.counter("ratelimit.service.rate_limit.quota.tenant.rlqs_allowed") == 8);
  CHECK(f.counter("ratelimit.service.rate_limit.quota.tenant.rlqs_denied") == 3);
  CHECK(f.counter("ratelimit.service.rate_limit.quota.free.rlqs_allowed") == 4);
  CHECK(responses(f.body(id)).size() == 1);  // the empty report is not answered
}

TEST_CASE(
    "buckets are matched as descriptors: wildcards, nesting, unit_multiplier, the tightest of rate_limits") {
  quota_fixture f(test_settings(), false);
  f.service->set_rules(sluice::test::compile_rules(R"(---
domain: rules
descriptors:
  - key: plan
    value: "gold*"
    rate_limit: {unit: minute, requests_per_unit: 120}
  - key: org
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 600, unit_multiplier: 10}
  - key: zone
    descriptors:
      - key: app
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: multi
    rate_limits:
      - {unit: second, requests_per_unit: 100}
      - {unit: minute, requests_per_unit: 3000}
)",
                                                   f.stats));
  const auto id = f.open();
  f.send(id, reports("rules", {{{{"plan", "gold-1"}}, 1},
                               {{{"plan", "silver"}}, 1},
                               {{{"user", "u"}, {"org", "x"}}, 1},
                               {{{"org", "x"}}, 1},
                               {{{"zone", "z"}, {"app", "a"}}, 1},
                               {{{"multi", "m"}}, 1}}));
  auto first = [&](const bucket& b) {
    const auto a = actions_for(f.body(id), b);
    REQUIRE(a.size() == 1);
    return a[0];
  };
  // One client, not measured yet: its share is the whole budget.
  // gold*: 120 per minute = 2/s; share 120 per window: max_tokens floor(120 × 0.01) = floor(1.2) = 1,
  // tokens_per_fill floor((120 - 1) / 60 × 60) = 119, fill 60.
  CHECK(token_bucket_of(first({{"plan", "gold-1"}})) == bucket_numbers{1, 119, 60});
  CHECK(blanket_of(first({{"plan", "silver"}})) == RateLimitStrategy::ALLOW_ALL);
  // org → user: 600 per 10 minutes; share 600 per 600 s window: max_tokens floor(600 × 0.01) = 6,
  // tokens_per_fill floor((600 - 6) / 600 × 600) = 594, fill max(600, 60) = 600.
  CHECK(token_bucket_of(first({{"org", "x"}, {"user", "u"}})) == bucket_numbers{6, 594, 600});
  CHECK(blanket_of(first({{"org", "x"}})) == RateLimitStrategy::ALLOW_ALL);  // a limit only at the last entry
  // Pairs are walked sorted by key: {app, zone} does not reach zone → app (documented: "sorted by key").
  CHECK(blanket_of(first({{"zone", "z"}, {"app", "a"}})) == RateLimitStrategy::ALLOW_ALL);
  // 100/s and 3000/min (50/s): the tightest is the budget. share 3000 per 60 s: max_tokens
  // floor(3000 × 0.01) = 30, tokens_per_fill floor((3000 - 30) / 60 × 60) = 2970, fill 60.
  CHECK(token_bucket_of(first({{"multi", "m"}})) == bucket_numbers{30, 2970, 60});
}

TEST_CASE("RLQS_STRATEGY=requests_per_time_unit: shares as requests per unit") {
  auto s = test_settings();
  s.strategy = sluice::ratelimit::rlqs::strategy::requests_per_time_unit;
  quota_fixture f(s);
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"tenant", "acme"}}, 1}, {{{"blocked", "x"}}, 1}}));
  // tenant: one client, the whole budget of 1/s: 60 per MINUTE.
  const auto a = actions_for(f.body(id), {{"tenant", "acme"}});
  REQUIRE(a.size() == 1);
  const auto& strategy = a[0].quota_assignment_action().rate_limit_strategy();
  REQUIRE(strategy.has_requests_per_time_unit());
  CHECK(strategy.requests_per_time_unit().requests_per_time_unit() == 60);
  CHECK(strategy.requests_per_time_unit().time_unit() == envoy::type::v3::RateLimitUnit::MINUTE);
  const auto blocked = actions_for(f.body(id), {{"blocked", "x"}});
  REQUIRE(blocked.size() == 1);
  CHECK(blanket_of(blocked[0]) == RateLimitStrategy::DENY_ALL);
}

TEST_CASE("GOAWAY (shutdown, max connection age) ends open quota streams with UNAVAILABLE") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("quota", {{{{"tenant", "acme"}}, 1}}));
  f.server->session().goaway();
  f.pump();
  CHECK(grpc_status(f.client.at(id)) == "14");
  CHECK(f.client.at(id).closed);
  CHECK(actions_for(f.body(id), {{"tenant", "acme"}}).size() == 1);
}
