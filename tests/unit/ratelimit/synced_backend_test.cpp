// REDIS_SYNC_INTERVAL: synced_backend over the real redis_backend and a fake Redis that runs the commands,
// with a fake clock; flushes are called by the tests (the timer is not started).

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../../support/fake_redis.hpp"
#include "ratelimit/backends/redis/counter_commands.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/backends/redis/synced_backend.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "redis/cluster_slot.hpp"

using namespace sluice;
namespace rr = ratelimit::backends::redis;
using ratelimit::limiter::batch_mode;
using ratelimit::limiter::counter_op;
using ratelimit::limiter::op_kind;
using ratelimit::limiter::op_result;
using held_end = test::fake_redis::held_end;

namespace {

constexpr std::int64_t start_seconds = 1'795'000'000;

struct recorder final : ratelimit::limiter::completion {
  bool done = false;
  std::optional<std::string> error;
  void complete(const ratelimit::limiter::backend_error* e) noexcept override {
    done = true;
    if (e != nullptr) error = e->message;
  }
};

// One instance's worker: its synced backend over the exact one, both on `redis`.
struct worker {
  worker(boost::asio::io_context& ioc, test::fake_redis& redis, const core::clock& clock,
         rr::sync_stats& sync, std::size_t max_keys = 1000)
      : exact(ioc.get_executor(), redis, nullptr),
        synced(ioc.get_executor(), exact, redis, nullptr, clock,
               {std::chrono::milliseconds(50), max_keys, 512}, sync) {}
  rr::redis_backend exact;
  rr::synced_backend synced;
};

struct rig {
  boost::asio::io_context ioc;
  test::fake_redis redis;
  core::fake_clock clock{start_seconds};
  stats::store stats;
  rr::sync_stats sync{stats};
  std::deque<worker> workers;
  std::deque<std::string> keys;  // the ops' keys live here

  rig(std::size_t n = 1, std::size_t max_keys = 1000) {
    for (std::size_t i = 0; i < n; ++i) workers.emplace_back(ioc, redis, clock, sync, max_keys);
  }
  rr::synced_backend& synced(std::size_t i = 0) { return workers[i].synced; }
  void run() {
    ioc.restart();
    ioc.poll();
  }
  counter_op op(std::string_view key, std::uint64_t hits = 1, std::uint64_t limit = 10) {
    counter_op o;
    o.key = keys.emplace_back(key);
    o.increment = hits;
    o.algorithm = ratelimit::limiter::fixed_window_op{limit, start_seconds + 60};
    o.ttl_seconds = 60;
    o.now_us = clock.now_micros();
    return o;
  }
  // Hits given back (negative hits_addend).
  counter_op refund(std::string_view key, std::uint64_t hits, std::uint64_t limit) {
    auto o = op(key, hits, limit);
    o.refund = true;
    return o;
  }
  // Starts a decision; its results and completion are kept by the caller.
  void start(std::size_t w, std::span<const counter_op> ops, std::span<op_result> results, recorder& r,
             batch_mode mode = batch_mode::independent) {
    synced(w).increment(ops, results, r, mode);
  }
  op_result decide(std::size_t w, const counter_op& o, std::optional<std::string>* error = nullptr) {
    op_result result;
    recorder r;
    synced(w).increment({&o, 1}, {&result, 1}, r, batch_mode::independent);
    run();
    REQUIRE(r.done);
    if (error != nullptr) *error = r.error;
    return result;
  }
  void flush_all() {
    for (auto& w : workers) w.synced.flush();
    run();
  }
};

std::size_t requests_with(const test::fake_redis& redis, std::string_view command) {
  std::size_t n = 0;
  for (const auto& r : redis.requests)
    for (const auto& c : r)
      if (c[0] == command) ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "the first hit of a key is read from Redis; later hits are decided locally and flushed as one INCRBY") {
  rig t;
  auto first = t.decide(0, t.op("d_k_v_1"));
  CHECK(first.value == 1);
  CHECK(t.redis.count("INCRBY") == 1);
  CHECK(t.redis.data["d_k_v_1"].ttl == 60);
  for (int i = 2; i <= 7; ++i) CHECK(t.decide(0, t.op("d_k_v_1")).value == static_cast<std::uint64_t>(i));
  CHECK(t.redis.count("INCRBY") == 1);  // nothing sent yet
  t.flush_all();
  CHECK(t.redis.count("INCRBY") == 2);
  CHECK(t.redis.count("EXPIRE") == 2);
  CHECK(t.redis.value("d_k_v_1") == 7);
  CHECK(t.redis.requests.back() ==
        std::vector<std::vector<std::string>>{{"INCRBY", "d_k_v_1", "6"}, {"EXPIRE", "d_k_v_1", "60"}});
  CHECK(t.sync.flushes.value() == 1);
  CHECK(t.sync.flushed_keys.value() == 1);
  CHECK(t.sync.reads.value() == 1);
  CHECK(t.synced().unsent_hits() == 0);
  // Nothing new: a flush sends nothing.
  t.flush_all();
  CHECK(t.redis.count("INCRBY") == 2);
}

TEST_CASE("others' hits arrive with each flush's reply; hits_addend counts as many") {
  rig t(2);
  t.decide(0, t.op("k", 1, 100));
  t.decide(1, t.op("k", 1, 100));
  CHECK(t.redis.value("k") == 2);
  t.decide(0, t.op("k", 5, 100));
  t.decide(1, t.op("k", 3, 100));
  t.flush_all();
  CHECK(t.redis.value("k") == 10);
  // Worker 1 flushed last: its reply carried everything.
  CHECK(t.decide(1, t.op("k", 1, 100)).value == 11);
  CHECK(t.decide(0, t.op("k", 1, 100)).value == 8);  // worker 0's flush was answered with 7
}

TEST_CASE("one deciding alone decides exactly as Redis would (random hits, refunds and limits)") {
  rig t;
  std::mt19937 random(7);
  std::int64_t exact = 0;
  bool over = false;  // the exact reference with upstream's local over-limit cache
  for (int i = 0; i < 2000; ++i) {
    auto o = t.op("k", random() % 4, 200);
    o.refund = random() % 10 == 0;
    if (random() % 7 == 0) t.clock.advance_micros(20'000);
    o.now_us = t.clock.now_micros();
    const auto r = t.decide(0, o);
    std::uint64_t want = 0;
    if (o.refund) {
      exact -= std::min<std::int64_t>(exact, static_cast<std::int64_t>(o.increment));
      want = static_cast<std::uint64_t>(exact);
      if (exact <= 200) over = false;
    } else {
      want = static_cast<std::uint64_t>(exact) + o.increment;
      if (!over) {
        exact += static_cast<std::int64_t>(o.increment);
        over = exact > 200;
      }
    }
    REQUIRE(r.value == want);
    if (random() % 5 == 0) t.flush_all();
  }
  t.flush_all();
  CHECK(t.redis.value("k") == exact);
}

TEST_CASE("a refund on a counter over its limit whose view is old is read from Redis, and leaves it over") {
  // (The simulator's 'fixed_window synced' seeds 606 and 960: a refund brought an old view under, and the
  // next requests were admitted from it, missing what the others had flushed since.)
  rig t(2);
  for (int i = 0; i < 11; ++i) t.decide(0, t.op("k", 1, 10));
  t.flush_all();
  CHECK(t.redis.value("k") == 11);
  for (int i = 0; i < 5; ++i) t.decide(1, t.op("k", 1, 100));
  t.flush_all();
  CHECK(t.redis.value("k") == 16);
  t.clock.advance_micros(100'000);                       // worker 0's view (11) is two intervals old
  CHECK(t.decide(0, t.refund("k", 2, 10)).value == 14);  // from Redis's 16, not the view's 11
  CHECK(t.redis.value("k") == 14);
  // Still over: the next hit is refused from the view just read, and not counted.
  const auto r = t.decide(0, t.op("k", 1, 10));
  CHECK(r.value == 15);
  t.flush_all();
  CHECK(t.redis.value("k") == 14);
}

TEST_CASE("a flush's reply that brings a counter over its limit back under makes it read again when old") {
  // (The simulator's 'fixed_window synced' seed 799: a counter still marked over, its view under the limit,
  // admitted from a view hundreds of milliseconds old.)
  rig t(2);
  for (int i = 0; i < 8; ++i) t.decide(1, t.op("k", 1, 10));
  t.flush_all();
  CHECK(t.redis.value("k") == 8);
  t.decide(0, t.op("k", 1, 10));                     // read: 9
  t.decide(0, t.op("k", 1, 10));                     // 10
  CHECK(t.decide(0, t.op("k", 1, 10)).value == 11);  // over (the hit that passed the limit counts)
  t.decide(1, t.refund("k", 5, 10));                 // worker 1's own view: 3
  t.synced(1).flush();
  t.run();
  CHECK(t.redis.value("k") == 4);
  t.synced(0).flush();
  t.run();
  CHECK(t.redis.value("k") == 6);  // worker 0's reply: under its limit again
  t.clock.advance_micros(100'000);
  for (int i = 0; i < 4; ++i) t.decide(1, t.op("k", 1, 10));
  t.flush_all();
  CHECK(t.redis.value("k") == 10);
  // Worker 0's view (6) is old: read again, so the hit is judged on Redis's 10, and refused.
  CHECK(t.decide(0, t.op("k", 1, 10)).value == 11);
}

TEST_CASE("a key over its limit stops counting until its window ends: no more Redis traffic") {
  rig t;
  for (int i = 1; i <= 10; ++i) CHECK(t.decide(0, t.op("k", 1, 10)).value <= 10);
  CHECK(t.decide(0, t.op("k", 1, 10)).value == 11);  // the hit over the limit counts, as upstream's
  t.flush_all();
  CHECK(t.redis.value("k") == 11);
  const auto sent = t.redis.requests.size();
  for (int i = 0; i < 50; ++i) {
    t.clock.advance_micros(100'000);  // long past the view's freshness
    auto o = t.op("k", 1, 10);
    CHECK(t.decide(0, o).value == 12);
  }
  t.flush_all();
  CHECK(t.redis.requests.size() == sent);
  CHECK(t.redis.value("k") == 11);
}

TEST_CASE("a key over a low limit counts again, read afresh, for an op whose limit is higher (#1077)") {
  rig t(2);
  for (int i = 1; i <= 3; ++i) t.decide(0, t.op("k", 1, 2));  // over 2 at 3
  t.flush_all();
  for (int i = 0; i < 4; ++i) t.decide(1, t.op("k", 1, 100));  // another instance: 7 in Redis
  t.flush_all();
  t.clock.advance_micros(100'000);                 // long past worker 0's view's freshness
  CHECK(t.decide(0, t.op("k", 1, 2)).value == 4);  // still over the low limit: decided alone, not counted
  const auto incrby = t.redis.count("INCRBY");
  CHECK(t.decide(0, t.op("k", 1, 10)).value == 8);  // a raised limit: read again and counted
  CHECK(t.redis.count("INCRBY") == incrby + 1);
}

TEST_CASE("a view older than an interval is read again before it is decided from") {
  rig t(2);
  t.decide(0, t.op("k", 1, 100));
  t.decide(1, t.op("k", 1, 100));  // worker 1 read 2
  for (int i = 0; i < 5; ++i) t.decide(0, t.op("k", 1, 100));
  t.flush_all();  // Redis: 7
  t.clock.advance_micros(40'000);
  CHECK(t.decide(1, t.op("k", 1, 100)).value == 3);  // fresh: its own view, which misses worker 0's hits
  t.flush_all();
  t.clock.advance_micros(60'000);  // nothing unsent, and no answer within the interval
  const auto incrby = t.redis.count("INCRBY");
  CHECK(t.decide(1, t.op("k", 1, 100)).value == 9);  // read: Redis said 8 before, so 9
  CHECK(t.redis.count("INCRBY") == incrby + 1);
}

TEST_CASE("ops on a key being read wait for the answer and are then decided from it") {
  rig t(2);
  t.redis.hold = true;
  auto a = t.op("k", 1, 3), b = t.op("k", 1, 3), c = t.op("k", 2, 3);
  op_result ra, rb, rc;
  recorder da, db, dc;
  t.start(0, {&a, 1}, {&ra, 1}, da);
  t.start(0, {&b, 1}, {&rb, 1}, db);
  t.start(0, {&c, 1}, {&rc, 1}, dc);
  t.run();
  CHECK(t.redis.held.size() == 1);  // one read for the three
  CHECK_FALSE(da.done);
  CHECK_FALSE(db.done);
  t.redis.data["k"].value = 5;  // another instance counted 5 meanwhile: over the limit of 3
  t.redis.answer_held();
  t.run();
  CHECK(da.done);
  CHECK(db.done);
  CHECK(dc.done);
  CHECK(ra.value == 6);
  // Decided from the read's answer, which is over the limit: not counted.
  CHECK(rb.value == 7);
  CHECK(rc.value == 8);
  t.redis.hold = false;
  t.flush_all();
  CHECK(t.redis.value("k") == 6);
}

TEST_CASE("two ops of one decision on one key: the second waits for the first's read") {
  rig t;
  std::vector<counter_op> ops{t.op("k", 1, 5), t.op("k", 2, 5)};
  std::vector<op_result> results(2);
  recorder r;
  t.start(0, ops, results, r);
  t.run();
  REQUIRE(r.done);
  CHECK(results[0].value == 1);
  CHECK(results[1].value == 3);
  t.flush_all();
  CHECK(t.redis.value("k") == 3);
}

TEST_CASE("negative hits given back in a batch go as the refund script, never below zero") {
  rig t;
  t.decide(0, t.op("k", 5, 100));
  auto refund = t.refund("k", 3, 100);
  CHECK(t.decide(0, refund).value == 2);
  t.flush_all();
  CHECK(requests_with(t.redis, "EVAL") == 1);
  CHECK(t.redis.value("k") == 2);
  auto big = t.refund("k", 10, 100);
  CHECK(t.decide(0, big).value == 0);
  t.flush_all();
  CHECK(t.redis.value("k") == 0);
}

TEST_CASE("a refund beyond a stale view takes back the other workers' hits that reached Redis") {
  rig t(2);
  t.decide(0, t.op("k", 1, 1000));
  t.decide(1, t.op("k", 1, 1000));
  t.decide(1, t.op("k", 50, 1000));
  t.flush_all();
  CHECK(t.redis.value("k") == 52);
  // Worker 0 has not seen worker 1's 50 (its view, 1, is fresh): 1 is given back there, 39 in Redis.
  auto refund = t.refund("k", 40, 1000);
  CHECK(t.decide(0, refund).value == 0);
  CHECK(t.synced(0).unsent_hits() == 40);
  t.flush_all();
  CHECK(t.redis.value("k") == 12);
  CHECK(t.synced(0).unsent_hits() == 0);
  CHECK(t.redis.requests.back() == std::vector<std::vector<std::string>>{
                                       {"EVAL", std::string(rr::unseen_refund_script), "1", "k", "39", "1"},
                                       {"EVAL", std::string(rr::refund_script), "1", "k", "1"}});
}

TEST_CASE("a refund beyond the view never takes back the worker's own hits, sent or not") {
  rig t;
  t.decide(0, t.op("k", 3, 100));
  auto refund = t.refund("k", 10, 100);
  CHECK(t.decide(0, refund).value == 0);
  CHECK(t.decide(0, t.op("k", 5, 100)).value == 5);
  t.flush_all();
  CHECK(t.redis.value("k") == 5);  // as Redis alone: 3, then 0, then 5
  // Given back beyond the view while a flush is out: what that flush brings is the worker's own too.
  t.redis.hold = true;
  t.decide(0, t.op("k", 4, 100));
  t.synced().flush();
  auto again = t.refund("k", 20, 100);
  CHECK(t.decide(0, again).value == 0);
  t.redis.hold = false;
  t.redis.answer_held();
  t.run();
  t.flush_all();
  CHECK(t.redis.value("k") == 0);
  CHECK(t.synced().unsent_hits() == 0);
}

TEST_CASE("a refund beyond the view while a flush is out counts that flush's hits as its own") {
  rig t;
  t.decide(0, t.op("k", 10, 1000));
  CHECK(t.decide(0, t.refund("k", 15, 1000)).value == 0);
  t.decide(0, t.op("k", 12, 1000));
  t.redis.hold = true;
  t.synced().flush();  // the first refund's 5 beyond the view, and +2
  // Before the answer: the view (12) holds the flush's hits, which the script must not take again.
  CHECK(t.decide(0, t.refund("k", 20, 1000)).value == 0);
  t.decide(0, t.op("k", 20, 1000));
  t.redis.hold = false;
  t.redis.answer_held();
  t.run();
  t.flush_all();
  CHECK(t.redis.value("k") == 20);  // as Redis alone: 10, 0, 12, 0, 20
  CHECK(t.synced().unsent_hits() == 0);
}

TEST_CASE("a refund beyond the view, then the flush out fails: its hits come after the script") {
  rig t;
  t.decide(0, t.op("k", 10, 1000));
  t.decide(0, t.refund("k", 4, 1000));
  t.redis.hold = true;
  t.synced().flush();  // -4, held
  CHECK(t.decide(0, t.refund("k", 10, 1000)).value == 0);
  t.decide(0, t.op("k", 8, 1000));
  t.redis.hold = false;
  t.redis.answer_held(held_end::never_written);  // Redis never ran it: -4 is unsent again
  t.run();
  t.clock.advance_micros(200'000);
  t.flush_all();
  CHECK(t.redis.value("k") == 8);  // as Redis alone: 10, 6, 0, 8
  CHECK(t.synced().unsent_hits() == 0);
}

TEST_CASE("a refund beyond the view that fails is sent again, once") {
  rig t(2);
  t.decide(0, t.op("k", 1, 1000));
  t.decide(1, t.op("k", 30, 1000));
  t.flush_all();
  auto refund = t.refund("k", 20, 1000);
  CHECK(t.decide(0, refund).value == 0);
  t.redis.down = true;
  t.synced(0).flush();
  t.run();
  CHECK(t.synced(0).unsent_hits() == 20);
  t.redis.down = false;
  t.clock.advance_micros(200'000);  // two intervals: Redis is trusted again
  t.flush_all();
  CHECK(t.redis.value("k") == 11);
  CHECK(t.synced(0).unsent_hits() == 0);
}

// A reply lost: Redis may have run the flush or not, and the worker cannot tell. Hits are sent again (at
// least once: stricter); hits given back are not (at most once: never looser).
TEST_CASE("a refund whose reply is lost after Redis ran it is not sent again: given back once") {
  rig t;
  t.decide(0, t.op("k", 10, 100));
  t.flush_all();
  t.decide(0, t.refund("k", 4, 100));
  t.redis.hold = true;
  t.flush_all();
  t.redis.answer_held(held_end::lost_after_run);
  t.run();
  t.redis.hold = false;
  t.clock.advance_micros(200'000);
  t.flush_all();
  CHECK(t.redis.value("k") == 6);
  CHECK(t.synced().unsent_hits() == 0);
  // The view kept the 4 as not given back (stricter) until Redis is read again.
  CHECK(t.decide(0, t.op("k", 1, 100)).value == 7);
}

TEST_CASE("a refund whose reply is lost before Redis ran it is not given back (stricter)") {
  rig t;
  t.decide(0, t.op("k", 10, 100));
  t.flush_all();
  t.decide(0, t.refund("k", 4, 100));
  t.redis.hold = true;
  t.flush_all();
  t.redis.answer_held(held_end::lost_before_run);
  t.run();
  t.redis.hold = false;
  t.clock.advance_micros(200'000);
  t.flush_all();
  CHECK(t.redis.value("k") == 10);
  CHECK(t.synced().unsent_hits() == 0);
  CHECK(std::ranges::count_if(t.redis.requests, [](const auto& request) {
          return std::ranges::any_of(request, [](const auto& c) { return c[0] == "EVAL"; });
        }) == 1);  // sent once, never again
}

TEST_CASE("a refund beyond the view whose reply is lost is not sent again either") {
  rig t(2);
  t.decide(0, t.op("k", 1, 1000));
  t.decide(1, t.op("k", 30, 1000));
  t.flush_all();
  CHECK(t.decide(0, t.refund("k", 20, 1000)).value == 0);  // 1 from the view, 19 beyond it
  t.redis.hold = true;
  t.synced(0).flush();
  t.redis.answer_held(held_end::lost_after_run);
  t.run();
  t.redis.hold = false;
  t.clock.advance_micros(200'000);
  t.flush_all();
  CHECK(t.redis.value("k") == 11);  // 31 - 20, once
  CHECK(t.synced(0).unsent_hits() == 0);
}

TEST_CASE("hits and a refund on other keys in one lost flush: the hits are sent again, the refund not") {
  rig t;
  t.decide(0, t.op("a", 5, 100));
  t.decide(0, t.op("b", 5, 100));
  t.flush_all();
  t.decide(0, t.op("a", 3, 100));
  t.decide(0, t.refund("b", 2, 100));
  t.redis.hold = true;
  t.flush_all();
  t.redis.answer_held(held_end::lost_after_run);
  t.run();
  t.redis.hold = false;
  t.clock.advance_micros(200'000);
  t.flush_all();
  CHECK(t.redis.value("a") == 11);  // 8, and the lost 3 again (stricter)
  CHECK(t.redis.value("b") == 3);   // given back once
}

TEST_CASE("sliding windows count only what they admit") {
  rig t;
  // 1'795'000'020 starts a minute window: 30 s in, half the previous window still weighs.
  t.clock.set(1'795'000'050);
  auto sliding = [&](std::string_view key) {
    auto o = t.op(key, 1, 4);
    o.algorithm = ratelimit::limiter::sliding_window_op{4, start_seconds + 60, t.keys.emplace_back("prev"),
                                                        60'000'000, 0};
    return o;
  };
  t.redis.data["prev"].value = 4;  // weighs ceil(4 × 0.5) = 2
  int admitted = 0;
  for (int i = 0; i < 6; ++i) {
    auto o = sliding("cur");
    const auto r = t.decide(0, o);
    if (ratelimit::limiter::admits(o, r)) ++admitted;
  }
  CHECK(admitted == 2);
  t.flush_all();
  CHECK(t.redis.value("cur") == 2);
}

TEST_CASE("GCRA ops and all-or-nothing batches go to Redis each time") {
  rig t;
  auto all = t.op("a", 1, 10);
  all.role = 0;
  for (int i = 0; i < 3; ++i) {
    op_result result;
    recorder r;
    t.start(0, {&all, 1}, {&result, 1}, r, batch_mode::all_or_nothing);
    t.run();
    CHECK(r.done);
  }
  CHECK(t.synced().keys() == 0);
  t.flush_all();
  CHECK(t.synced().keys() == 0);  // nothing held for them
  auto g = t.op("g", 1, 10);
  g.algorithm = ratelimit::limiter::gcra_op{1'000, 5'000};
  const auto before = t.redis.requests.size();
  op_result result;
  recorder r;
  t.start(0, {&g, 1}, {&result, 1}, r);
  t.run();
  CHECK(t.redis.requests.size() > before);
}

TEST_CASE("Redis unreachable: decisions go on from local counts, and the hits reach Redis when it is back") {
  rig t;
  t.decide(0, t.op("known", 1, 100));
  t.redis.down = true;
  std::optional<std::string> error;
  for (int i = 0; i < 4; ++i) {
    CHECK(t.decide(0, t.op("known", 1, 100), &error).value == static_cast<std::uint64_t>(2 + i));
    CHECK_FALSE(error);
  }
  CHECK(t.decide(0, t.op("new", 1, 100), &error).value == 1);  // its read failed: its own hits only
  CHECK_FALSE(error);
  t.clock.advance_micros(500'000);
  CHECK(t.decide(0, t.op("new", 1, 100), &error).value == 2);
  t.flush_all();
  CHECK(t.sync.flush_errors.value() == 1);
  CHECK(t.synced().unsent_hits() == 6);
  t.redis.down = false;
  t.flush_all();
  CHECK(t.redis.value("known") == 5);
  CHECK(t.redis.value("new") == 2);
  CHECK(t.synced().unsent_hits() == 0);
  CHECK(t.sync.dropped_hits.value() == 0);
}

TEST_CASE("while Redis fails, a stale counter with nothing unsent is decided from what it holds, not read") {
  rig t;
  t.decide(0, t.op("clean", 1, 100));
  t.redis.down = true;
  t.decide(0, t.op("other", 1, 100));  // a read that fails: Redis is failing
  CHECK(t.sync.failing_stores.load() == 1);
  t.clock.advance_micros(500'000);  // "clean" is long stale, and has nothing unsent
  const auto sent = t.redis.requests.size();
  std::optional<std::string> error;
  CHECK(t.decide(0, t.op("clean", 1, 100), &error).value == 2);
  CHECK_FALSE(error);
  CHECK(t.redis.requests.size() == sent);
  t.flush_all();  // fails now
  // Redis answers at once: still failing until two intervals have passed without a failure.
  t.redis.down = false;
  t.flush_all();
  CHECK(t.redis.value("clean") == 2);
  CHECK(t.sync.failing_stores.load() == 1);
  t.clock.advance_micros(100'000);
  t.decide(0, t.op("third", 1, 100));  // a read answered
  CHECK(t.sync.failing_stores.load() == 0);
  // Stale counters are read again.
  t.clock.advance_micros(100'000);
  const auto incrby = t.redis.count("INCRBY");
  CHECK(t.decide(0, t.op("clean", 1, 100)).value == 3);
  CHECK(t.redis.count("INCRBY") == incrby + 1);
}

TEST_CASE(
    "a failing Redis with nothing to send is asked at each flush: its recovery is known without a decision") {
  rig t;
  t.redis.down = true;
  t.decide(0, t.op("k", 1, 100));  // its read fails: Redis is failing
  t.flush_all();                   // its hit fails to go
  CHECK(t.sync.failing_stores.load() == 1);
  t.redis.down = false;
  t.flush_all();  // the hit goes
  CHECK(t.redis.value("k") == 1);
  CHECK(t.synced().unsent_hits() == 0);
  // Nothing left to send, no decision: each flush asks (PING); two intervals on, Redis has recovered.
  const auto pings = t.redis.calls["PING"];
  t.clock.advance_micros(100'000);
  t.flush_all();
  CHECK(t.redis.calls["PING"] == pings + 1);
  CHECK(t.sync.failing_stores.load() == 0);
  t.flush_all();
  CHECK(t.redis.calls["PING"] == pings + 1);  // not failing: not asked
}

TEST_CASE("a counter over its limit counts again once a flush's reply brings it under (others gave back)") {
  rig t;
  for (int i = 0; i < 10; ++i) t.decide(0, t.op("k", 1, 10));
  t.flush_all();                                     // Redis: 10
  CHECK(t.decide(0, t.op("k", 1, 10)).value == 11);  // over, and counted
  t.redis.data["k"].value = 4;                       // another instance gave 6 back
  t.flush_all();                                     // the reply: 5
  CHECK(t.decide(0, t.op("k", 1, 10)).value == 6);   // admitted: so it counts
  t.flush_all();
  CHECK(t.redis.value("k") == 6);
}

TEST_CASE("a reply lost after Redis applied the flush: the hits count twice (at least once)") {
  rig t;
  t.decide(0, t.op("k", 1, 100));
  t.decide(0, t.op("k", 4, 100));
  t.redis.hold = true;
  t.flush_all();
  t.redis.answer_held(held_end::lost_after_run);
  t.run();
  t.redis.hold = false;
  t.flush_all();
  CHECK(t.redis.value("k") == 9);
}

TEST_CASE("a drain ends only after every store's flush: the per-second Redis down, the main one up") {
  boost::asio::io_context ioc;
  test::fake_redis main, per_second;
  core::fake_clock clock(start_seconds);
  stats::store stats;
  rr::sync_stats sync(stats);
  rr::redis_backend exact(ioc.get_executor(), main, &per_second);
  rr::synced_backend synced(ioc.get_executor(), exact, main, &per_second, clock,
                            {std::chrono::milliseconds(50), 100, 512}, sync);
  std::deque<std::string> keys{"sec", "min"};
  auto decide = [&](const std::string& key, bool per_second_limit) {
    counter_op o;
    o.key = key;
    o.increment = 1;
    o.algorithm = ratelimit::limiter::fixed_window_op{100, start_seconds + 60};
    o.ttl_seconds = 60;
    o.per_second = per_second_limit;
    op_result r;
    recorder done;
    synced.increment({&o, 1}, {&r, 1}, done, batch_mode::independent);
    ioc.restart();
    ioc.poll();
    REQUIRE(done.done);
  };
  for (int i = 0; i < 3; ++i) {
    decide(keys[0], true);
    decide(keys[1], false);
  }
  per_second.down = true;
  main.hold = true;
  bool drained = false;
  synced.drain([&] { drained = true; });
  ioc.restart();
  ioc.poll();
  CHECK_FALSE(drained);  // the per-second flush failed at once; the main one is out
  main.answer_held();
  ioc.restart();
  ioc.poll();
  CHECK(drained);
  CHECK(main.value("min") == 3);
}

TEST_CASE("a flush request lost before Redis applied it is sent again") {
  rig t;
  t.decide(0, t.op("k", 1, 100));
  t.decide(0, t.op("k", 4, 100));
  t.redis.hold = true;
  t.flush_all();
  t.decide(0, t.op("k", 2, 100));                  // while the flush is in flight
  t.redis.answer_held(held_end::lost_before_run);  // the connection broke before Redis ran it
  t.run();
  t.redis.hold = false;
  t.flush_all();
  CHECK(t.redis.value("k") == 7);
}

TEST_CASE(
    "no room for a key while Redis is unreachable: decided alone, its hits and negative hits dropped and "
    "counted") {
  rig t(1, 2);
  t.redis.down = true;
  t.decide(0, t.op("a"));
  t.decide(0, t.op("b"));
  std::optional<std::string> error;
  CHECK(t.decide(0, t.op("c", 3, 10), &error).value == 3);
  CHECK_FALSE(error);
  CHECK(t.sync.dropped_hits.value() == 3);
  CHECK(t.decide(0, t.refund("d", 2, 10), &error).value == 0);  // negative hits alike: not given back
  CHECK_FALSE(error);
  CHECK(t.sync.dropped_refunds.value() == 2);
  CHECK(t.sync.dropped_hits.value() == 3);
  // With Redis up, a key without room goes to Redis on its own.
  t.redis.down = false;
  t.flush_all();
  CHECK(t.decide(0, t.op("c", 1, 10)).value == 1);
  CHECK(t.redis.value("c") == 1);
}

TEST_CASE("counters whose window ended are forgotten once nothing of them is unsent") {
  rig t;
  rr::synced_counters counters(10, 50'000);
  auto read = [&](std::string_view key, std::int64_t end) {
    auto o = t.op(key);
    std::get<ratelimit::limiter::fixed_window_op>(o.algorithm).window_end = end;
    auto found = counters.find(o, o.now_us, false);
    REQUIRE(found.how == rr::synced_counters::route::read);
    op_result r;
    r.value = 1;
    counters.read_answered(*found.counter, o, r, o.now_us);
    return std::pair{found.counter, o};
  };
  auto [clean, clean_op] = read("clean", start_seconds + 60);
  auto [busy, busy_op] = read("busy", start_seconds + 60);
  auto [later, later_op] = read("later", start_seconds + 120);
  op_result out;
  counters.decide(*busy, busy_op, out);            // a hit unsent
  CHECK(counters.sweep(start_seconds + 60) == 0);  // the windows end at +60
  CHECK(counters.sweep(start_seconds + 61) == 1);  // "clean"; "busy" has a hit unsent
  CHECK(counters.size() == 2);
  std::vector<rr::synced_counters::flush_item> items;
  counters.take_flush(items);
  REQUIRE(items.size() == 1);
  CHECK(counters.sweep(start_seconds + 62) == 0);  // its flush is out
  counters.flush_answered(*busy, 2, busy_op.now_us);
  CHECK(counters.sweep(start_seconds + 63) == 1);
  CHECK(counters.size() == 1);
  CHECK(counters.sweep(start_seconds + 121) == 1);
  CHECK(counters.size() == 0);
  (void)clean;
  (void)clean_op;
  (void)later;
  (void)later_op;
}

TEST_CASE(
    "a key that is not a counter: its flushed hits are dropped, and its decisions then fail as without "
    "batching") {
  rig t;
  t.decide(0, t.op("good", 1, 100));
  t.decide(0, t.op("bad", 1, 100));
  t.decide(0, t.op("good", 2, 100));
  t.decide(0, t.op("bad", 2, 100));
  t.redis.data["bad"].garbage = true;  // someone SET it meanwhile
  t.flush_all();
  CHECK(t.redis.value("good") == 3);
  CHECK(t.sync.dropped_hits.value() == 2);
  CHECK(t.synced().unsent_hits() == 0);
  std::optional<std::string> error;
  t.decide(0, t.op("bad", 1, 100), &error);  // read again: refused, as the exact path would be
  REQUIRE(error);
  CHECK(*error == "Redis error: ERR value is not an integer or out of range");
  t.decide(0, t.op("good", 1, 100), &error);  // not an outage: the others go on
  CHECK_FALSE(error);
  t.flush_all();
  CHECK(t.sync.dropped_hits.value() == 2);
  CHECK(t.redis.value("good") == 4);
}

TEST_CASE("Redis taking no writes now (READONLY): the flush's hits are sent again") {
  rig t;
  t.decide(0, t.op("k", 1, 100));
  t.decide(0, t.op("k", 4, 100));
  t.redis.refuse_writes = "READONLY You can't write against a read only replica.";
  t.flush_all();
  CHECK(t.sync.dropped_hits.value() == 0);
  CHECK(t.sync.flush_errors.value() == 1);
  CHECK(t.synced().unsent_hits() == 4);
  t.redis.refuse_writes.clear();
  t.flush_all();
  CHECK(t.redis.value("k") == 5);
}

TEST_CASE("an all-or-nothing batch that applied adds its hits to the views of the counters held") {
  core::fake_clock clock(start_seconds);
  rr::synced_counters counters(10, 50'000);
  counter_op held;
  held.key = "held";
  held.increment = 1;
  held.algorithm = ratelimit::limiter::fixed_window_op{10, 0};
  held.now_us = clock.now_micros();
  auto found = counters.find(held, held.now_us, false);
  op_result read;
  read.value = 1;
  counters.read_answered(*found.counter, held, read, held.now_us);
  auto other = held;
  other.key = "other";  // not held here: nothing to add to
  std::vector<counter_op> batch{held, other};
  batch[0].increment = 2;
  std::vector<op_result> results(2);
  results[0].value = 3;
  results[1].value = 11;  // over its limit: the batch does not apply
  counters.add_applied(batch, results, false);
  CHECK(found.counter->view() == 1);
  results[1].value = 1;
  counters.add_applied(batch, results, false);
  CHECK(found.counter->view() == 3);
}

TEST_CASE("on a cluster, a flush request holds one key") {
  rig t;
  t.redis.cluster = true;
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) names.push_back("key" + std::to_string(i));
  for (const auto& n : names) t.decide(0, t.op(n, 1, 100));
  for (const auto& n : names) t.decide(0, t.op(n, 1, 100));
  const auto before = t.redis.requests.size();
  t.flush_all();
  std::size_t keys = 0;
  for (auto r = t.redis.requests.begin() + static_cast<std::ptrdiff_t>(before); r != t.redis.requests.end();
       ++r) {
    const auto slot = redis::hash_slot((*r)[0][1]);
    for (const auto& c : *r) CHECK(redis::hash_slot(c[1]) == slot);
    CHECK(r->size() == 2);  // one key: a redirection concerns it alone
    keys += r->size() / 2;
  }
  CHECK(keys == names.size());
  for (const auto& n : names) CHECK(t.redis.value(n) == 2);
}

TEST_CASE("STOP mode's read ahead answers from the view") {
  rig t;
  t.decide(0, t.op("k", 3, 10));
  auto o = t.op("k");
  op_result result;
  recorder r;
  t.synced().get({&o, 1}, {&result, 1}, r);
  t.run();
  CHECK(r.done);
  CHECK(result.value == 3);
  CHECK(t.redis.count("GET") == 0);
  auto unknown = t.op("u");
  t.synced().get({&unknown, 1}, {&result, 1}, r);
  t.run();
  CHECK(t.redis.count("GET") == 1);
}

TEST_CASE("a drain sends everything unsent and then calls back; Redis down: it calls back at once") {
  rig t;
  t.decide(0, t.op("k"));
  t.decide(0, t.op("k", 4));
  bool drained = false;
  t.redis.hold = true;
  t.synced().drain([&] { drained = true; });
  t.run();
  CHECK_FALSE(drained);
  t.redis.answer_held();
  t.run();
  CHECK(drained);
  CHECK(t.redis.value("k") == 5);
  t.redis.hold = false;
  t.decide(0, t.op("k", 2));
  t.redis.down = true;
  drained = false;
  t.synced().drain([&] { drained = true; });
  t.run();
  CHECK(drained);
}

TEST_CASE("several deciders admit at most the limit plus what the others counted since the views' reads") {
  // Three workers take turns on one key, a turn every 4 ms; each flushes every 12 turns (its interval, 48 ms,
  // within the 50 ms freshness). The bound in docs/concepts/batched-counting.md with no round trip: the
  // others' hits in 3 intervals, at 2 hits per 3 turns: 2/3 × 36 = 24.
  rig t(3);
  const std::uint64_t limit = 100;
  int admitted = 0;
  for (int turn = 0; turn < 400; ++turn) {
    const std::size_t w = static_cast<std::size_t>(turn) % 3;
    t.clock.advance_micros(4'000);
    if (static_cast<std::size_t>(turn % 12) == w * 4) {
      t.synced(w).flush();
      t.run();
    }
    if (t.decide(w, t.op("k", 1, limit)).value <= limit) ++admitted;
  }
  t.flush_all();
  CHECK(admitted >= static_cast<int>(limit));
  CHECK(admitted <= static_cast<int>(limit) + 24);
  // Redis holds what was counted: the admitted hits and each worker's first hit over the limit at most.
  CHECK(t.redis.value("k") >= admitted);
  CHECK(t.redis.value("k") <= admitted + 3);
}
