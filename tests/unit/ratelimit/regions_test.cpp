// Several regions (docs/guides/regions.md): the settings, the remote reads' commands and replies, and the
// regional backend over a fake inner backend (what it sends down, what it gives back).

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "../../support/temp_dir.hpp"
#include "core/env.hpp"
#include "ratelimit/backends/redis/region_settings.hpp"
#include "ratelimit/backends/redis/regional_backend.hpp"
#include "ratelimit/backends/redis/remote_reads.hpp"
#include "ratelimit/backends/redis/settings.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "ratelimit/limiter/leases.hpp"

using namespace sluice;
namespace rr = ratelimit::backends::redis;
namespace lim = ratelimit::limiter;
namespace rd = sluice::redis;

namespace {

rr::redis_settings read(std::map<std::string, std::string> env) {
  env.emplace("REDIS_SOCKET_TYPE", "tcp");
  env.emplace("REDIS_URL", "127.0.0.1:6379");
  return rr::read_redis_settings(core::env_reader(std::move(env)), false, false);
}

std::string refusal(std::map<std::string, std::string> env) {
  try {
    read(std::move(env));
  } catch (const core::settings_error& e) {
    return e.what();
  }
  return "(accepted)";
}

rd::value bulk(std::string text) {
  rd::value v;
  v.type = rd::value::kind::bulk_string;
  v.text = std::move(text);
  return v;
}
rd::value array(std::vector<rd::value> elements) {
  rd::value v;
  v.type = rd::value::kind::array;
  v.elements = std::move(elements);
  return v;
}
rd::value nil() {
  return {};
}

// An inner backend that records what it was sent and answers each op with `value`s set by the test.
struct fake_inner final : lim::backend {
  std::vector<lim::counter_op> sent;
  std::vector<std::uint64_t> values;  // per op: the result's value (the store's own count)
  bool fail = false;
  void answer(std::span<const lim::counter_op> ops, std::span<lim::op_result> results,
              lim::completion& done) {
    sent.assign(ops.begin(), ops.end());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      results[i].value = i < values.size() ? values[i] : 0;
      results[i].before = results[i].value;
    }
    if (fail) {
      lim::backend_error e{"down"};
      return done.complete(&e);
    }
    done.complete(nullptr);
  }
  void increment(std::span<const lim::counter_op> ops, std::span<lim::op_result> results,
                 lim::completion& done, lim::batch_mode) override {
    answer(ops, results, done);
  }
  void get(std::span<const lim::counter_op> ops, std::span<lim::op_result> results,
           lim::completion& done) override {
    answer(ops, results, done);
  }
  void inspect(std::span<const lim::counter_op> ops, std::span<lim::op_result> results,
               lim::completion& done) override {
    answer(ops, results, done);
  }
  void overwrite(std::span<const lim::counter_op> ops, lim::completion& done) override {
    sent.assign(ops.begin(), ops.end());
    done.complete(nullptr);
  }
};

struct recorder final : lim::completion {
  int calls = 0;
  bool failed = false;
  void complete(const lim::backend_error* e) noexcept override {
    ++calls;
    failed = e != nullptr;
  }
};

constexpr std::int64_t now_us = 1'796'000'000'000'000;

lim::counter_op fixed(std::string_view key, std::uint64_t limit, std::uint64_t hits = 1) {
  lim::counter_op op;
  op.key = key;
  op.increment = hits;
  op.now_us = now_us;
  op.algorithm = lim::fixed_window_op{limit, now_us / 1'000'000 + 60};
  return op;
}

// A first view: each key a slot, in order.
std::shared_ptr<rr::remote_view> view_of(std::map<std::string, std::uint64_t> totals) {
  auto v = std::make_shared<rr::remote_view>(totals.size());
  std::uint32_t slot = 0;
  for (const auto& [k, t] : totals) {
    v->added.emplace_back(std::make_shared<const std::string>(k), slot);
    v->totals[slot++] = t;
  }
  return v;
}

}  // namespace

TEST_CASE("regions: settings") {
  auto none = read({});
  CHECK_FALSE(none.regions);
  auto s = read({{"REDIS_REGION", "eu-west"},
                 {"REDIS_REMOTE_REGIONS", "us=10.0.0.1:6380, ap=unix:/run/ap.sock"},
                 {"REDIS_REMOTE_SYNC_INTERVAL", "100ms"},
                 {"REDIS_REMOTE_MAX_LAG", "1s"},
                 {"REDIS_REMOTE_FALLBACK", "share"}});
  REQUIRE(s.regions);
  CHECK(s.regions->region == "eu-west");
  REQUIRE(s.regions->remotes.size() == 2);
  CHECK(s.regions->remotes[0].name == "us");
  CHECK(s.regions->remotes[0].connection.address == "10.0.0.1:6380");
  CHECK_FALSE(s.regions->remotes[0].connection.unix_socket);
  CHECK(s.regions->remotes[1].connection.address == "/run/ap.sock");
  CHECK(s.regions->remotes[1].connection.unix_socket);
  CHECK(s.regions->sync_interval == std::chrono::milliseconds(100));
  CHECK(s.regions->max_lag == std::chrono::seconds(1));
  CHECK(s.regions->fallback == rr::remote_fallback::share);
  CHECK(s.regions->region_count() == 3);
  // Defaults.
  auto d = read({{"REDIS_REGION", "eu"}});
  CHECK(d.regions->remotes.empty());
  CHECK(d.regions->sync_interval == std::chrono::milliseconds(250));
  CHECK(d.regions->max_lag == std::chrono::seconds(2));
  CHECK(d.regions->fallback == rr::remote_fallback::last);
  CHECK(d.regions->cold_interval == std::chrono::milliseconds(0));
  CHECK(read({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_COLD_INTERVAL", "2s"}}).regions->cold_interval ==
        std::chrono::seconds(2));
}

TEST_CASE("regions: bad settings name the variable and what is wrong") {
  CHECK(refusal({{"REDIS_REMOTE_REGIONS", "us=a:1"}}) ==
        "REDIS_REMOTE_REGIONS needs REDIS_REGION: name this instance's region");
  CHECK(refusal({{"REDIS_REGION", "eu west"}}).find("REDIS_REGION: expected a name") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_REGIONS", "eu=a:1"}})
            .find("'eu' is this instance's own region") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_REGIONS", "us=a:1,us=b:2"}})
            .find("region 'us' is listed twice") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_REGIONS", "us"}})
            .find("expected <region>=<host:port or unix:path>, got 'us'") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_REGIONS", "us=nohost"}})
            .find("region 'us': expected one host:port or unix:path") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:1,b:2"}})
            .find("REDIS_REGION cannot be used with REDIS_TYPE=cluster") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_SYNC_INTERVAL", "1ms"}})
            .find("REDIS_REMOTE_SYNC_INTERVAL: expected a duration from 10ms to 10s") != std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_MAX_LAG", "100ms"}})
            .find("REDIS_REMOTE_MAX_LAG: expected a duration of at least REDIS_REMOTE_SYNC_INTERVAL") !=
        std::string::npos);
  CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_FALLBACK", "guess"}}).find("REDIS_REMOTE_FALLBACK") !=
        std::string::npos);
  for (const char* cold : {"300ms", "61s"}) {
    CHECK(refusal({{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_COLD_INTERVAL", cold}})
              .find("REDIS_REMOTE_COLD_INTERVAL: expected 0s (off), or a duration from twice "
                    "REDIS_REMOTE_SYNC_INTERVAL to 60s") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(
      rr::refuse_redis_settings(core::env_reader(std::map<std::string, std::string>{{"REDIS_REGION", "eu"}}),
                                "memory"),
      doctest::Contains("REDIS_REGION applies to BACKEND_TYPE=redis only"), core::settings_error);
}

TEST_CASE("regions: REDIS_REMOTE_AUTH_FILE gives each region its line") {
  testing::temp_dir dir;
  const auto path =
      dir.write("remote-auth", "# the other regions' passwords\nus = s3cret\n\nap=alice:pw\n").string();
  auto s = read(
      {{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_REGIONS", "us=a:1,ap=b:2"}, {"REDIS_REMOTE_AUTH_FILE", path}});
  CHECK(s.regions->remotes[0].connection.auth_file->current().password == "s3cret");
  CHECK(s.regions->remotes[1].connection.auth_file->current().username == "alice");
  CHECK(s.regions->remotes[1].connection.auth_file->current().password == "pw");
  const auto missing = refusal(
      {{"REDIS_REGION", "eu"}, {"REDIS_REMOTE_REGIONS", "us=a:1,sa=b:2"}, {"REDIS_REMOTE_AUTH_FILE", path}});
  CHECK(missing.find("REDIS_REMOTE_AUTH_FILE") != std::string::npos);
  CHECK(missing.find("has no line for sa") != std::string::npos);
  CHECK(missing.find("s3cret") == std::string::npos);
}

TEST_CASE("regions: heartbeat fields") {
  const auto text = rr::encode_heartbeat(1234, {{"ap", false}, {"us", true}});
  CHECK(text == "1234|ap=0,us=1");
  std::int64_t ms = 0;
  std::map<std::string, bool> sees;
  REQUIRE(rr::decode_heartbeat(text, ms, sees));
  CHECK(ms == 1234);
  CHECK(sees == std::map<std::string, bool>{{"ap", false}, {"us", true}});
  sees.clear();
  CHECK(rr::decode_heartbeat("99|", ms, sees));
  CHECK(sees.empty());
  for (const char* bad : {"", "x|", "12", "12|us", "12|us=2", "12|=1", "12|us=11"}) {
    CAPTURE(bad);
    CHECK_FALSE(rr::decode_heartbeat(bad, ms, sees));
  }
}

TEST_CASE("regions: one round's commands and their replies") {
  const std::string a = "rl_k_a_1", b = "rl_k_b_1", lease = "rl_c_x", holders = "rl_h_y";
  rr::tracked_key counter, leases, per_holder;
  leases.kind = rr::remote_kind::leases;
  leases.timing = lim::lease_timing_of(4);  // slices of 1 s, 4 of them
  per_holder.kind = rr::remote_kind::holders;
  std::vector<rr::key_read> keys{{&lease, &leases}, {&a, &counter}, {&holders, &per_holder}, {&b, &counter}};
  rr::order_for_reads(keys);
  CHECK(*keys[0].key == a);
  CHECK(*keys[1].key == b);
  CHECK(*keys[2].key == lease);
  CHECK(*keys[3].key == holders);
  rd::request req;
  rr::push_remote_reads(req, "sluice_region:us", keys, now_us);
  CHECK(req.expected_replies() == 6);  // INFO, HGETALL, MGET, HGETALL, ZRANGEBYSCORE, HGETALL
  CHECK(req.payload().find("ZRANGEBYSCORE") != std::string::npos);
  CHECK(req.payload().find("rl_h_y_slots") != std::string::npos);

  const std::int64_t now_slice = now_us / 1'000'000;
  std::vector<rd::value> replies{
      bulk("# Replication\r\nrole:slave\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:1\r\n"),
      array({bulk("i1"), bulk("1796000000000|eu=1,ap=0"), bulk("i2"), bulk("1795999999000|eu=0"), bulk("i3"),
             bulk("garbage")}),
      array({bulk("7"), nil()}),
      // Slices: one expired (older than now - 4), two held.
      array({bulk(std::to_string(now_slice - 5)), bulk("9"), bulk(std::to_string(now_slice - 4)), bulk("2"),
             bulk(std::to_string(now_slice)), bulk("1")}),
      array({bulk("alice")}),  // live holders
      array({bulk("halice"), bulk("2"), bulk("hbob"), bulk("5"), bulk("n"), bulk("7")}),
  };
  rr::region_health health;
  std::vector<std::uint64_t> totals;
  std::string error;
  REQUIRE(rr::read_remote_replies(replies, keys, now_us, 1'796'000'000'000 - 500, health, totals, error));
  CHECK(health.replica);
  CHECK(health.link_up);
  CHECK(health.last_io_s == 1);
  CHECK(health.heartbeat_ms == 1'796'000'000'000);
  // Only the fresh field counts for what that region cannot see: i2's "eu=0" is too old.
  CHECK(health.cannot_see == std::vector<std::string>{"ap"});
  CHECK(totals == std::vector<std::uint64_t>{7, 0, 3, 2});

  replies[0] = bulk("role:slave\r\nmaster_link_status:down\r\n");
  REQUIRE(rr::read_remote_replies(replies, keys, now_us, 0, health, totals, error));
  CHECK_FALSE(health.link_up);
  rd::value err;
  err.type = rd::value::kind::error;
  err.text = "NOAUTH Authentication required.";
  replies[2] = err;
  CHECK_FALSE(rr::read_remote_replies(replies, keys, now_us, 0, health, totals, error));
  CHECK(error == "NOAUTH Authentication required.");
  replies[2].text.clear();  // an error reply without text (found by fuzz_remote_reads): still a reason
  CHECK_FALSE(rr::read_remote_replies(replies, keys, now_us, 0, health, totals, error));
  CHECK(error == "an empty error reply");
  replies.resize(2);
  CHECK_FALSE(rr::read_remote_replies(replies, keys, now_us, 0, health, totals, error));
  CHECK(error == "unexpected reply to MGET");
}

TEST_CASE("regions: MGET goes in chunks of 512 keys") {
  std::vector<std::string> names;
  for (int i = 0; i < 1100; ++i) names.push_back("k" + std::to_string(i));
  rr::tracked_key counter;
  std::vector<rr::key_read> keys;
  for (const auto& n : names) keys.push_back({&n, &counter});
  rd::request req;
  rr::push_remote_reads(req, "hb", keys, now_us);
  CHECK(req.expected_replies() == 2 + 3);
}

TEST_CASE("regions: a decision's limit is lowered by the remote total, which its result gets back") {
  fake_inner inner;
  rr::regional_backend regional(inner, false);
  const std::string key = "rl_k_a_1", other = "rl_k_b_1";
  std::vector<lim::counter_op> ops{fixed(key, 10), fixed(other, 10)};
  std::vector<lim::op_result> results(2);
  recorder done;

  SUBCASE("a key the view lacks counts nothing remote, is sent as it is, and is listed for the reader") {
    inner.values = {3, 1};
    regional.increment(ops, results, done, lim::batch_mode::independent);
    CHECK(done.calls == 1);
    CHECK(inner.sent[0].limit() == 10);
    CHECK(results[0].value == 3);
    auto listed = regional.take_new_keys();
    CHECK(listed.size() == 2);
    CHECK(listed.at(key).kind == rr::remote_kind::counter);
    CHECK(listed.at(key).limit == 10);
    CHECK(listed.at(key).until_us == (now_us / 1'000'000 + 60 + 1) * 1'000'000);
    CHECK(regional.take_new_keys().empty());
  }
  SUBCASE("a key in the view: limit lowered, total added to the value") {
    regional.set_view(view_of({{key, 6}, {other, 0}}));
    inner.values = {3, 1};
    regional.increment(ops, results, done, lim::batch_mode::all_or_nothing);
    CHECK(done.calls == 1);
    CHECK(inner.sent[0].limit() == 4);
    CHECK(inner.sent[1].limit() == 10);
    CHECK(results[0].value == 9);
    CHECK(results[1].value == 1);
    CHECK(regional.take_new_keys().empty());
    CHECK(lim::admits(ops[0], results[0]));  // 9 of 10
    inner.values = {5, 1};
    regional.increment(ops, results, done, lim::batch_mode::independent);
    CHECK_FALSE(lim::admits(ops[0], results[0]));  // 11 of 10
  }
  SUBCASE("inspected: the remote total is in the store's own value too, so unsent hits stay this worker's") {
    regional.set_view(view_of({{key, 6}}));
    inner.values = {3, 1};
    regional.inspect(ops, results, done);
    CHECK(results[0].value == 9);
    CHECK(results[0].before == 9);
    CHECK(results[1].before == 1);
  }
  SUBCASE("a remote total past the limit lowers it to 0, never below") {
    regional.set_view(view_of({{key, 25}}));
    inner.values = {0, 0};
    regional.get(ops, results, done);
    CHECK(inner.sent[0].limit() == 0);
    CHECK(results[0].value == 25);
  }
  SUBCASE("a failure adds nothing and is passed on") {
    regional.set_view(view_of({{key, 6}}));
    inner.fail = true;
    inner.values = {3, 1};
    regional.increment(ops, results, done, lim::batch_mode::independent);
    CHECK(done.calls == 1);
    CHECK(done.failed);
    CHECK(results[0].value == 3);
  }
  SUBCASE("overwrite changes this region's keys only, as they are") {
    regional.set_view(view_of({{key, 6}}));
    regional.overwrite(ops, done);
    CHECK(inner.sent[0].limit() == 10);
  }
}

TEST_CASE("regions: each view changes the worker's key -> slot map: additions, then removals") {
  fake_inner inner;
  rr::regional_backend regional(inner, false);
  const std::string a = "rl_a", b = "rl_b";
  auto op_a = fixed(a, 10), op_b = fixed(b, 10);
  regional.set_view(view_of({{a, 4}}));  // a in slot 0
  CHECK(regional.remote_total(op_a) == 4);
  CHECK(regional.remote_total(op_b) == 0);  // not tracked yet: listed
  CHECK(regional.take_new_keys().size() == 1);
  // The next view: a dropped, b takes its slot.
  auto next = std::make_shared<rr::remote_view>(1);
  next->removed.push_back(std::make_shared<const std::string>(a));
  next->added.emplace_back(std::make_shared<const std::string>(b), 0);
  next->totals[0] = 7;
  regional.set_view(next);
  CHECK(regional.remote_total(op_b) == 7);
  CHECK(regional.remote_total(op_a) == 0);  // a's old slot is b's now: a counts nothing, and is listed again
  CHECK(regional.take_new_keys().contains(a));
  // A view without changes keeps the map.
  auto third = std::make_shared<rr::remote_view>(1);
  third->totals[0] = 9;
  regional.set_view(third);
  CHECK(regional.remote_total(op_b) == 9);
  // A key first tracked at its window's end is added and dropped in one view: the worker keeps no entry (the
  // view holds its name until then), so a later view's owner of the slot is not taken for it.
  CHECK(regional.take_new_keys().empty());
  const std::string c = "rl_c";
  auto brief = std::make_shared<rr::remote_view>(2);
  auto c_name = std::make_shared<const std::string>(c);
  brief->added.emplace_back(c_name, 1);
  brief->removed.push_back(c_name);
  brief->totals[0] = 9;
  brief->totals[1] = 5;  // what the slot holds: not c's
  regional.set_view(brief);
  auto op_c = fixed(c, 10);
  CHECK(regional.remote_total(op_c) == 0);
  CHECK(regional.take_new_keys().contains(c));
  CHECK(regional.remote_total(op_b) == 9);
}

TEST_CASE("regions: with a cold interval, workers report their own counts, rarely") {
  fake_inner inner;
  rr::regional_backend regional(inner, false, true);
  const std::string known = "rl_known", fresh = "rl_fresh";
  auto v = std::make_shared<rr::remote_view>(1, true);  // known in slot 0, no remote total
  v->added.emplace_back(std::make_shared<const std::string>(known), 0);
  regional.set_view(v);
  recorder done;
  std::vector<lim::op_result> results(1);
  auto decide = [&](const std::string& key, std::uint64_t store_count) {
    std::vector<lim::counter_op> ops{fixed(key, 320)};  // a step of 320 / 32 = 10
    inner.values = {store_count};
    regional.increment(ops, results, done, lim::batch_mode::independent);
    return results[0].value;
  };
  CHECK(decide(known, 9) == 9);  // less than a step: not written
  CHECK(v->local_seen[0].load() == 0);
  decide(known, 10);
  CHECK(v->local_seen[0].load() == 10);
  decide(known, 19);  // within a step of the last report
  CHECK(v->local_seen[0].load() == 10);
  decide(known, 25);
  CHECK(v->local_seen[0].load() == 25);
  // A key the view lacks: its count goes to the reader with the key, the highest seen.
  decide(fresh, 4);
  decide(fresh, 7);
  auto listed = regional.take_new_keys();
  REQUIRE(listed.contains(fresh));
  CHECK(listed.at(fresh).local == 7);
  // Concurrency keys report nothing (their holds are read every round).
  lim::counter_op lease;
  lease.key = known;
  lease.increment = 1;
  lease.now_us = now_us;
  lease.algorithm = lim::lease_op{5, {}};
  std::vector<lim::counter_op> ops{lease};
  inner.values = {300};
  regional.increment(ops, results, done, lim::batch_mode::independent);
  CHECK(v->local_seen[0].load() == 25);
}

TEST_CASE("regions: with REDIS_PERSECOND, per-second limits stay regional") {
  fake_inner inner;
  rr::regional_backend regional(inner, true);
  const std::string key = "rl_k_a_1";
  auto op = fixed(key, 10);
  op.per_second = true;
  regional.set_view(view_of({{key, 6}}));
  inner.values = {3};
  std::vector<lim::op_result> results(1);
  recorder done;
  regional.increment(std::span(&op, 1), results, done, lim::batch_mode::independent);
  CHECK(inner.sent[0].limit() == 10);
  CHECK(results[0].value == 3);
  CHECK(regional.take_new_keys().empty());
  op.per_second = false;  // a minute's limit on the same Redis: summed
  regional.increment(std::span(&op, 1), results, done, lim::batch_mode::independent);
  CHECK(results[0].value == 9);
}

TEST_CASE("regions: a sliding window adds the remote current count and the weighted previous one") {
  fake_inner inner;
  rr::regional_backend regional(inner, false);
  const std::string key = "rl_s_1", previous = "rl_s_0";
  lim::counter_op op;
  op.key = key;
  op.increment = 1;
  // A minute window, a quarter through it: the previous window weighs 3/4.
  const std::int64_t window_us = 60'000'000;
  const std::int64_t start = (now_us / window_us) * window_us;
  op.now_us = start + window_us / 4;
  op.algorithm = lim::sliding_window_op{100, (start + window_us) / 1'000'000, previous, window_us, 0};
  regional.set_view(view_of({{key, 10}, {previous, 40}}));
  inner.values = {5};
  std::vector<lim::op_result> results(1);
  recorder done;
  regional.increment(std::span(&op, 1), results, done, lim::batch_mode::independent);
  CHECK(inner.sent[0].limit() == 100 - 40);  // 10 + ceil(40 × 3/4)
  CHECK(results[0].value == 5 + 40);
}

TEST_CASE("regions: concurrency adds remote slots to the held counts before and after") {
  fake_inner inner;
  rr::regional_backend regional(inner, false);
  const std::string key = "rl_c";
  lim::counter_op op;
  op.key = key;
  op.increment = 1;
  op.now_us = now_us;
  op.algorithm = lim::lease_op{4, lim::lease_timing_of(30)};
  regional.set_view(view_of({{key, 2}}));
  inner.values = {1};
  std::vector<lim::op_result> results(1);
  recorder done;
  regional.increment(std::span(&op, 1), results, done, lim::batch_mode::independent);
  CHECK(inner.sent[0].limit() == 2);
  CHECK(results[0].value == 3);
  CHECK(results[0].before == 3);
  auto view = view_of({{key, 2}});
  CHECK_FALSE(view->used[0].load());
  regional.set_view(view);
  regional.increment(std::span(&op, 1), results, done, lim::batch_mode::independent);
  CHECK(view->used[0].load());  // the reader keeps reading a concurrency key in use
}
