// The worker's plan, end to end over in-process streams: fair shares of a bucket's budget among the clients
// that report it (on one worker, and on two workers through the exchange), pushes when a share moves,
// re-sends before the time to live runs out, idle buckets abandoned, rules reloads, and the stream/bucket
// gauges. Settings (quota_fixture.hpp): ttl 6 s (re-sent after 4 s), idle timeout 10 s, plan period 2 ms.

#include <doctest/doctest.h>

#include <algorithm>

#include "quota_fixture.hpp"

using namespace sluice::test::rlqs_support;
using envoy::type::v3::RateLimitStrategy;

namespace {

const bucket acme{{"tenant", "acme"}};

std::optional<bucket_numbers> last_bucket(quota_fixture& f, std::int32_t id, const bucket& b) {
  const auto a = actions_for(f.body(id), b);
  if (a.empty()) return std::nullopt;
  return token_bucket_of(a.back());
}

}  // namespace

TEST_CASE("two clients of one bucket: the first alone gets the whole budget, then each half") {
  quota_fixture f;
  const auto a = f.open();
  const auto b = f.open();
  f.send(a, reports("quota", {{acme, 1}}));
  f.send(b, reports("quota", {{acme, 1}}));
  // a's first answer: the client alone, the whole budget (see quota_stream_test): {1, 60, 60}. b's first
  // answer counts a, a member of the bucket on this worker (unmeasured: as if it wanted the whole budget):
  // needs {1.1, 1.1}, level 1 / 2 = 0.5: half at once, 30 per window, floor(30 × 0.01) = 0: {1, 30, 60}.
  CHECK(last_bucket(f, a, acme) == bucket_numbers{1, 60, 60});
  CHECK(last_bucket(f, b, acme) == bucket_numbers{1, 30, 60});

  f.clock.advance(1);
  f.send(a, reports("quota", {{acme, 90, 10}}));  // 100 in 1 s each
  f.send(b, reports("quota", {{acme, 100, 0}}));
  f.plan();
  // fleet {100, 100}, budget 1/s: needs {110, 110} (100 × 1.1; floor 1 × 0.05 / 2 = 0.025); level 1 / 2 =
  // 0.5. share 0.5/s = 30 per minute: floor(30 × 0.01) = 0, a share too small for a burst out of it:
  // max_tokens 1 and the whole refill, tokens_per_fill 30.
  // a's share fell: pushed; b's is what it holds: nothing new.
  CHECK(actions_for(f.body(a), acme).size() == 2);
  CHECK(actions_for(f.body(b), acme).size() == 1);
  const auto ta = last_bucket(f, a, acme);
  const auto tb = last_bucket(f, b, acme);
  CHECK(ta == bucket_numbers{1, 30, 60});
  CHECK(tb == bucket_numbers{1, 30, 60});
  REQUIRE(ta);
  REQUIRE(tb);
  // Together within the budget per window, but for one token each (shares under 100 a window keep their
  // whole refill): (1 + 30) + (1 + 30) = 62 <= 60 + 2.
  CHECK(ta->max_tokens + ta->tokens_per_fill + tb->max_tokens + tb->tokens_per_fill <= 60 + 2);
  // Assigned on this instance, per rule window: llround((30 / 60 + 30 / 60) × 60) = 60.
  CHECK(f.gauge("ratelimit.service.rate_limit.quota.tenant.rlqs_assigned") == 60);
  CHECK(f.gauge("ratelimit.rlqs.active_streams") == 2);
  CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 2);

  SUBCASE("the plan is stable: more periods at the same time push nothing more") {
    f.plan();
    CHECK(actions_for(f.body(a), acme).size() == 2);
    CHECK(actions_for(f.body(b), acme).size() == 1);
  }
  SUBCASE("when one leaves, the other's share moves back to the whole budget and is pushed") {
    f.send(b, "", true);
    CHECK(f.client.at(b).closed);
    f.plan();
    // fleet {100}: needs {110} → level 1 → share 1/s = 60 per window, under 100: {1, 60, 60} again.
    CHECK(actions_for(f.body(a), acme).size() == 3);
    CHECK(last_bucket(f, a, acme) == bucket_numbers{1, 60, 60});
    // llround(60 / 60 × 60) = 60.
    CHECK(f.gauge("ratelimit.service.rate_limit.quota.tenant.rlqs_assigned") == 60);
    CHECK(f.gauge("ratelimit.rlqs.active_streams") == 1);
    CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 1);
  }
}

TEST_CASE("a heavy and a light client: the light one gets its need, the heavy one the rest") {
  quota_fixture f;
  const auto heavy = f.open();
  const auto light = f.open();
  f.send(heavy, reports("quota", {{acme, 1}}));
  f.send(light, reports("quota", {{acme, 1}}));
  f.clock.advance(10);
  f.send(heavy, reports("quota", {{acme, 600, 400}}));  // 1000 in 10 s: 100/s
  f.send(light, reports("quota", {{acme, 1, 0}}));      // 1 in 10 s: 0.1/s
  f.plan();
  // needs: light max(0.1 × 1.1, 0.025) = 0.11, heavy 100 × 1.1 = 110; sorted, left = 1:
  //   i=0: 1 / 2 = 0.5 > 0.11 → left 0.89;  i=1: 0.89 / 1 <= 110 → level 0.89.
  // light 0.11/s = 6.6 per minute (floor(6.6 × 0.01) = 0: no whole token of burst in it): max_tokens 1 and
  // the whole refill, tokens_per_fill floor(6.6) = 6. heavy 0.89/s = 53.4 per minute, also under 100
  // (floor(0.534) = 0): max_tokens 1, tokens_per_fill floor(53.4) = 53.
  const auto th = last_bucket(f, heavy, acme);
  const auto tl = last_bucket(f, light, acme);
  CHECK(th == bucket_numbers{1, 53, 60});
  CHECK(tl == bucket_numbers{1, 6, 60});
  REQUIRE(th);
  REQUIRE(tl);
  // Within the budget per window but for one token each (both shares under 100 a window): (1 + 53) + (1 + 6)
  // = 61 <= 60 + 2.
  CHECK(th->max_tokens + th->tokens_per_fill + tl->max_tokens + tl->tokens_per_fill <= 60 + 2);
}

TEST_CASE("two workers share a bucket through the demand exchange") {
  sluice::ratelimit::rlqs::in_process_exchange exchange(2);
  quota_fixture w0(test_settings(), true, &exchange, 0);
  quota_fixture w1(test_settings(), true, &exchange, 1);
  const auto s0 = w0.open();
  const auto s1 = w1.open();
  w0.send(s0, reports("quota", {{acme, 1}}));
  w1.send(s1, reports("quota", {{acme, 1}}));
  w0.clock.advance(1);
  w1.clock.advance(1);
  w0.send(s0, reports("quota", {{acme, 100}}));
  w1.send(s1, reports("quota", {{acme, 100}}));

  // Worker 0 plans first: it sees only its own client's demand (worker 1 has published nothing): {1, 60, 60},
  // what it was told already, so nothing is pushed.
  w0.plan();
  CHECK(actions_for(w0.body(s0), acme).size() == 1);
  // Worker 1 sees both: needs {110, 110}, level 0.5/s, half each: {1, 30, 60}.
  w1.plan();
  CHECK(actions_for(w1.body(s1), acme).size() == 2);
  CHECK(last_bucket(w1, s1, acme) == bucket_numbers{1, 30, 60});
  // Worker 0's next plan sees worker 1's client too.
  w0.plan();
  CHECK(actions_for(w0.body(s0), acme).size() == 2);
  CHECK(last_bucket(w0, s0, acme) == bucket_numbers{1, 30, 60});
}

TEST_CASE("an unchanged assignment is re-sent when two thirds of its time to live have passed") {
  quota_fixture f;
  const auto id = f.open();
  f.send(id, reports("quota", {{acme, 1}}));
  f.plan();  // the same share as the first answer: nothing pushed
  CHECK(actions_for(f.body(id), acme).size() == 1);
  f.clock.advance(3);
  f.plan();  // 3 s < 6 s × 2/3
  CHECK(actions_for(f.body(id), acme).size() == 1);
  f.clock.advance(1);
  f.plan();  // 4 s: re-sent; the share has not moved (alone, the whole budget), so the same action
  const auto a = actions_for(f.body(id), acme);
  REQUIRE(a.size() == 2);
  CHECK(token_bucket_of(a[1]) == bucket_numbers{1, 60, 60});
  CHECK(a[1].quota_assignment_action().assignment_time_to_live().seconds() == 6);
  f.clock.advance(3);
  f.plan();  // 3 s since the re-send
  CHECK(actions_for(f.body(id), acme).size() == 2);
}

TEST_CASE("a share that rises by less than the push threshold is not pushed; the next re-send carries it") {
  // big: 6000 per minute (100/s). A saturated client and a light one whose demand falls a little, so the
  // saturated one's share rises by less than 10%.
  quota_fixture f;  // ttl 6 s: re-sent after 4 s
  const bucket big{{"big", "x"}};
  const auto heavy = f.open();
  const auto light = f.open();
  f.send(heavy, reports("quota", {{big, 1}}));
  f.send(light, reports("quota", {{big, 1}}));
  f.clock.advance(1);
  f.send(heavy, reports("quota", {{big, 1000}}));  // 1000/s
  f.send(light, reports("quota", {{big, 20}}));    // 20/s
  f.plan();
  // needs: light 20 × 1.1 = 22, heavy 1000 × 1.1 = 1100 (floor 100 × 0.05 / 2 = 2.5); sorted, left = 100:
  //   i=0: 100 / 2 = 50 > 22 → left 78;  i=1: 78 / 1 <= 1100 → level 78.
  // heavy 78/s = 4680 per window: max_tokens floor(46.8) = 46, tokens_per_fill floor(4680 - 46) = 4634
  // (77.23/s), less than its first answer (alone: the whole budget, {60, 5940, 60}): pushed.
  // light 22/s = 1320 per window: max_tokens floor(13.2) = 13, tokens_per_fill 1320 - 13 = 1307, less than
  // its first answer (half: {30, 2970, 60}): pushed.
  REQUIRE(actions_for(f.body(heavy), big).size() == 2);
  REQUIRE(actions_for(f.body(light), big).size() == 2);
  CHECK(last_bucket(f, heavy, big) == bucket_numbers{46, 4634, 60});
  CHECK(last_bucket(f, light, big) == bucket_numbers{13, 1307, 60});

  f.clock.advance(1);
  f.send(heavy, reports("quota", {{big, 1000}}));
  f.send(light, reports("quota", {{big, 15}}));  // light: (20 + 15) / 2 s = 17.5/s
  f.plan();
  // needs: light 17.5 × 1.1 = 19.25, heavy 1100; level 100 - 19.25 = 80.75.
  // heavy 80.75/s = 4845 per window: max_tokens floor(48.45) = 48, tokens_per_fill floor(4845 - 48) = 4797
  // (79.95/s): 3.5% more than the 77.23/s it holds, under the 10% push threshold: not pushed.
  // light 19.25/s = 1155 per window, less: pushed, max_tokens floor(11.55) = 11, tokens_per_fill 1144.
  CHECK(actions_for(f.body(heavy), big).size() == 2);
  CHECK(last_bucket(f, heavy, big) == bucket_numbers{46, 4634, 60});
  CHECK(actions_for(f.body(light), big).size() == 3);
  CHECK(last_bucket(f, light, big) == bucket_numbers{11, 1144, 60});

  f.clock.advance(2);
  f.plan();  // 3 s since heavy's push < 6 s × 2/3: still nothing
  CHECK(actions_for(f.body(heavy), big).size() == 2);
  f.clock.advance(1);
  f.plan();  // 4 s: the re-send, with the assignment as planned now, not the one it holds
  const auto a = actions_for(f.body(heavy), big);
  REQUIRE(a.size() == 3);
  CHECK(token_bucket_of(a[2]) == bucket_numbers{48, 4797, 60});
  CHECK(a[2].quota_assignment_action().assignment_time_to_live().seconds() == 6);
  // light was pushed 3 s ago: not re-sent yet.
  CHECK(actions_for(f.body(light), big).size() == 3);
  // rlqs_assigned sums what the clients hold: llround((4797 + 1144) / 60 × 60) = 5941.
  CHECK(f.gauge("ratelimit.service.rate_limit.quota.big.rlqs_assigned") == 5941);
}

TEST_CASE("a bucket idle for longer than bucket_idle_timeout is abandoned") {
  quota_fixture f;  // bucket_idle_timeout 10 s
  const bucket idle{{"tenant", "idle"}};
  const bucket busy{{"tenant", "busy"}};
  const auto id = f.open();
  f.send(id, reports("quota", {{idle, 1}, {busy, 1}}));  // T: both busy
  f.clock.advance(5);
  f.send(id, reports("quota", {{idle, 0, 0}, {busy, 5}}));  // T+5: idle says 0/0
  f.clock.advance(4);
  f.send(id, reports("quota", {{idle, 0, 0}, {busy, 5}}));  // T+9
  f.plan();
  // 9 s since idle's last request: kept.
  for (const auto& a : actions_for(f.body(id), idle)) CHECK_FALSE(a.has_abandon_action());
  CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 2);

  f.clock.advance(1);
  f.send(id, reports("quota", {{idle, 0, 0}, {busy, 5}}));  // T+10
  f.plan();
  // 10 s since idle's last request: abandoned; busy is not.
  auto idle_actions = actions_for(f.body(id), idle);
  REQUIRE_FALSE(idle_actions.empty());
  CHECK(idle_actions.back().has_abandon_action());
  CHECK(bucket_of(idle_actions.back()) == idle);
  CHECK(std::count_if(idle_actions.begin(), idle_actions.end(),
                      [](const auto& a) { return a.has_abandon_action(); }) == 1);
  for (const auto& a : actions_for(f.body(id), busy)) CHECK_FALSE(a.has_abandon_action());
  CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 1);
  CHECK(f.gauge("ratelimit.rlqs.active_streams") == 1);
  CHECK_FALSE(f.client.at(id).closed);

  SUBCASE("reported again, it is a new bucket: answered at once") {
    const auto before = idle_actions.size();
    f.send(id, reports("quota", {{idle, 0, 0}}));
    idle_actions = actions_for(f.body(id), idle);
    REQUIRE(idle_actions.size() == before + 1);
    CHECK(token_bucket_of(idle_actions.back()).has_value());
    f.plan();
    CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 2);
  }
  SUBCASE("a bucket the client stops reporting is abandoned as well") {
    f.clock.advance(10);
    f.plan();
    const auto busy_actions = actions_for(f.body(id), busy);
    REQUIRE_FALSE(busy_actions.empty());
    CHECK(busy_actions.back().has_abandon_action());
    CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 0);
  }
}

TEST_CASE("a rules reload matches every bucket again; the changed assignments go out with the next plan") {
  quota_fixture f(test_settings(), false);
  const auto id = f.open();
  f.send(id, reports("quota", {{acme, 1}}));
  auto a = actions_for(f.body(id), acme);
  REQUIRE(a.size() == 1);
  CHECK(blanket_of(a[0]) == RateLimitStrategy::ALLOW_ALL);

  f.service->set_rules(sluice::test::compile_rules(quota_rules, f.stats));
  f.plan();
  // tenant: 60 per minute, one client, unmeasured: the whole budget, 60 per window, under 100: {1, 60, 60};
  // assigned llround(60 / 60 × 60) = 60.
  CHECK(last_bucket(f, id, acme) == bucket_numbers{1, 60, 60});
  CHECK(f.gauge("ratelimit.service.rate_limit.quota.tenant.rlqs_assigned") == 60);

  f.service->set_rules(sluice::test::compile_rules(R"(---
domain: quota
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 0}
)",
                                                   f.stats));
  f.plan();
  a = actions_for(f.body(id), acme);
  REQUIRE(a.size() == 3);
  CHECK(blanket_of(a[2]) == RateLimitStrategy::DENY_ALL);
  CHECK(f.gauge("ratelimit.service.rate_limit.quota.tenant.rlqs_assigned") == 0);
}

TEST_CASE("the gauges count open streams and their buckets") {
  quota_fixture f;
  const auto a = f.open();
  const auto b = f.open();
  f.send(a, reports("quota", {{{{"tenant", "1"}}, 1}, {{{"free", "1"}}, 1}}));
  f.send(b, reports("quota", {{{{"tenant", "1"}}, 1}}));
  f.plan();
  CHECK(f.gauge("ratelimit.rlqs.active_streams") == 2);
  CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 3);  // (stream, bucket) pairs

  f.send(b, "", true);  // half-close: ended with OK
  CHECK(grpc_status(f.client.at(b)) == "0");
  f.plan();
  CHECK(f.gauge("ratelimit.rlqs.active_streams") == 1);
  CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 2);

  f.client.reset(a);  // RST_STREAM
  f.pump();
  f.plan();
  CHECK(f.gauge("ratelimit.rlqs.active_streams") == 0);
  CHECK(f.gauge("ratelimit.rlqs.active_buckets") == 0);
}

TEST_CASE("while shares are steady, the assignments in effect add up to at most the budget") {
  // docs/guides/rlqs.md#the-protocol, "The bound": "the fleet's clients together admit at most the budget per
  // window while shares are steady".
  // big: 6000 per minute (100/s). Ten saturated clients, then an eleventh.
  quota_fixture f;
  const bucket big{{"big", "x"}};
  std::vector<std::int32_t> streams;
  for (int i = 0; i < 10; ++i) {
    streams.push_back(f.open());
    f.send(streams.back(), reports("quota", {{big, 1}}));
  }
  f.clock.advance(1);
  for (auto id : streams) f.send(id, reports("quota", {{big, 1000}}));
  f.plan();
  // fleet 10 × 1000/s: needs 1100 each, level 100 / 10 = 10/s = 600 per window:
  // max_tokens floor(600 × 0.01) = 6, tokens_per_fill floor((600 - 6) / 60 × 60) = 594.
  for (auto id : streams) CHECK(last_bucket(f, id, big) == bucket_numbers{6, 594, 60});

  streams.push_back(f.open());
  f.send(streams.back(), reports("quota", {{big, 1}}));
  // The eleventh, unmeasured (counts as 100/s): needs 10 × 1100 and 110; level 100 / 11 = 9.09/s = 545.45
  // per window: max_tokens floor(5.45) = 5, tokens_per_fill floor(545.45 - 5) = floor(540.45) = 540.
  CHECK(last_bucket(f, streams.back(), big) == bucket_numbers{5, 540, 60});
  for (int round = 0; round < 3; ++round) {  // steady: everyone saturated, reporting every second
    f.clock.advance(1);
    for (auto id : streams) f.send(id, reports("quota", {{big, 1000}}));
    f.plan();
  }
  // Every client's fair share is now 100 / 11 = 9.09/s: {5, 540, 60}, 545 per window, 11 × 545 = 5995.
  // The ten first ones were told {6, 594, 60} (9.9/s); the new one is 540 / 60 = 9/s, less, and a share that
  // falls is pushed at once whatever the threshold: had they kept theirs, 10 × 600 + 545 = 6545 per window,
  // 9% over the budget.
  double in_effect = 0;
  double refill = 0;
  for (auto id : streams) {
    const auto tb = last_bucket(f, id, big);
    REQUIRE(tb);
    in_effect += tb->max_tokens + static_cast<double>(tb->tokens_per_fill) / tb->fill_seconds * 60;
    refill += static_cast<double>(tb->tokens_per_fill) / tb->fill_seconds * 60;
  }
  CHECK(in_effect <= 6000);
  CHECK(in_effect == 5995);  // 11 × (5 + 540)
  // The rlqs_assigned gauge ("the shares assigned on this instance, in requests per rule window") sums what
  // the clients hold, their refill: 11 × 540 = 5940 (it would say 10 × 594 + 540 = 6480 had the ten kept
  // theirs).
  CHECK(f.gauge("ratelimit.service.rate_limit.quota.big.rlqs_assigned") == static_cast<std::int64_t>(refill));
  CHECK(f.gauge("ratelimit.service.rate_limit.quota.big.rlqs_assigned") == 5940);
}
