#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ratelimit/backends/redis/script_batcher.hpp"

using namespace sluice;
using ratelimit::backends::redis::script_batcher;
using ratelimit::backends::redis::script_group;
using ratelimit::limiter::batch_mode;
using ratelimit::limiter::counter_op;
using ratelimit::limiter::op_kind;

namespace {

// Keeps what is sent; the test answers it.
class fake_store final : public redis::store {
 public:
  bool cluster = false;
  std::vector<std::shared_ptr<redis::pending_request>> sent;
  std::vector<std::string> keys;  // each request's routing key
  void start(observer) override {}
  void stop() override {}
  void exec(std::shared_ptr<redis::pending_request> request, std::string_view key) override {
    sent.push_back(std::move(request));
    keys.emplace_back(key);
  }
  bool one_key_per_request() const override { return cluster; }
  bool up() const override { return true; }
  std::string describe(boost::system::error_code) const override { return "down"; }
  std::string last_error() const override { return {}; }
  redis::connection_stats stats() const override { return {}; }
};

counter_op bucket_op(std::string_view key) {
  counter_op op;
  op.key = key;
  op.increment = 1;
  op.algorithm = ratelimit::limiter::gcra_op{1'000, 5'000};
  op.now_us = 1'795'000'000'000'000;
  return op;
}

redis::value integer(std::int64_t n) {
  redis::value v;
  v.type = redis::value::kind::integer;
  v.integer = n;
  return v;
}

std::size_t count(const std::string& payload, std::string_view what) {
  std::size_t n = 0;
  for (auto at = payload.find(what); at != std::string::npos; at = payload.find(what, at + 1)) ++n;
  return n;
}

struct answered {
  bool called = false;
  bool error = false;
  const redis::value* script = nullptr;
  std::size_t at = 0, gcra = 0;
};

}  // namespace

TEST_CASE(
    "script_batcher: a GCRA key only one decision touches goes as BITFIELD, shared keys through the script") {
  boost::asio::io_context io;
  fake_store store;
  script_batcher batcher(io.get_executor(), store);
  const std::vector<counter_op> ops{bucket_op("shared"), bucket_op("shared"), bucket_op("alone"),
                                    bucket_op("atomic")};
  const std::size_t first[] = {0}, second[] = {1}, third[] = {2}, fourth[] = {3};
  std::vector<answered> got(4);
  auto add = [&](std::span<const std::size_t> indexes, batch_mode mode, std::size_t k) {
    batcher.add(script_group{ops, indexes, mode}, ops[indexes.front()].key,
                [&, k](const std::string* error, const script_batcher::answer& a) {
                  got[k] = {true, error != nullptr, a.script, a.at, a.gcra.size()};
                });
  };
  add(first, batch_mode::independent, 0);
  add(second, batch_mode::independent, 1);
  add(third, batch_mode::independent, 2);
  add(fourth, batch_mode::all_or_nothing, 3);  // all or nothing: always the script
  io.run();

  REQUIRE(store.sent.size() == 1);
  const auto& payload = store.sent[0]->payload;
  CHECK(count(payload, "BITFIELD") == 1);
  CHECK(count(payload, "PEXPIRE") == 1);
  CHECK(count(payload, "EVALSHA") == 1);
  CHECK(payload.find("BITFIELD") < payload.find("EVALSHA"));
  CHECK(payload.find("EVALSHA") < payload.find("PEXPIRE"));
  CHECK(count(payload, "$5\r\nalone\r\n") == 2);  // BITFIELD's and PEXPIRE's key, not the script's
  CHECK(store.sent[0]->expected_replies == 3);
  redis::value script;
  script.type = redis::value::kind::array;

  SUBCASE("each group gets its part") {
    std::vector<redis::value> replies{redis::value{}, script, integer(1)};
    store.sent[0]->done({}, std::move(replies));
    CHECK((got[2].called && !got[2].error && got[2].script == nullptr && got[2].gcra == 1));
    for (std::size_t k : {0, 1, 3}) CHECK((got[k].called && !got[k].error && got[k].script != nullptr));
    CHECK(got[0].at == 0);
    CHECK(got[1].at == 2);  // after the first group's applied flag and arrival time
    CHECK(got[3].at == 4);
  }
  SUBCASE("NOSCRIPT: the BITFIELDs are answered, the script's groups go again with the script") {
    redis::value noscript;
    noscript.type = redis::value::kind::error;
    noscript.text = "NOSCRIPT No matching script.";
    std::vector<redis::value> replies{redis::value{}, noscript, integer(1)};
    store.sent[0]->done({}, std::move(replies));
    CHECK((got[2].called && got[2].gcra == 1));
    CHECK_FALSE((got[0].called || got[1].called || got[3].called));
    REQUIRE(store.sent.size() == 2);
    const auto& again = store.sent[1]->payload;
    CHECK(count(again, "BITFIELD") == 0);
    CHECK(count(again, "$4\r\nEVAL\r\n") == 1);
    CHECK(store.sent[1]->expected_replies == 1);
  }
  SUBCASE("a failed PEXPIRE fails its group: the key would never go away") {
    redis::value readonly;
    readonly.type = redis::value::kind::error;
    readonly.text = "READONLY You can't write against a read only replica.";
    store.sent[0]->done({}, {redis::value{}, script, readonly});
    CHECK((got[2].called && got[2].error));
    for (std::size_t k : {0, 1, 3}) CHECK((got[k].called && !got[k].error));
  }
  SUBCASE("a failed connection fails every group") {
    store.sent[0]->done(boost::asio::error::connection_reset, {});
    for (const auto& g : got) CHECK((g.called && g.error));
  }
}

TEST_CASE("script_batcher: on a cluster a lone GCRA op is a request of its own") {
  // A request is sent again whole when its first key is being migrated: BITFIELDs of other keys must not
  // share it. A group of two GCRA ops stays in the script.
  boost::asio::io_context io;
  fake_store store;
  store.cluster = true;
  script_batcher batcher(io.get_executor(), store);
  const std::vector<counter_op> ops{bucket_op("{t}a"), bucket_op("{t}b"), bucket_op("{t}c"),
                                    bucket_op("{t}d")};
  const std::size_t first[] = {0}, second[] = {1}, pair[] = {2, 3};
  std::vector<answered> got(3);
  auto add = [&](std::span<const std::size_t> indexes, std::size_t k) {
    batcher.add(script_group{ops, indexes, batch_mode::independent}, ops[indexes.front()].key,
                [&, k](const std::string* error, const script_batcher::answer& a) {
                  got[k] = {true, error != nullptr, a.script, a.at, a.gcra.size()};
                });
  };
  add(first, 0);
  add(second, 1);
  add(pair, 2);
  io.run();

  REQUIRE(store.sent.size() == 3);
  CHECK(store.keys == std::vector<std::string>{"{t}a", "{t}b", "{t}a"});
  for (std::size_t r : {0, 1}) {
    CHECK(count(store.sent[r]->payload, "BITFIELD") == 1);
    CHECK(store.sent[r]->expected_replies == 2);
  }
  CHECK(count(store.sent[2]->payload, "BITFIELD") == 0);
  CHECK(count(store.sent[2]->payload, "EVALSHA") == 1);
  store.sent[1]->done({}, {redis::value{}, integer(1)});
  CHECK((got[1].called && got[1].gcra == 1));
  CHECK_FALSE((got[0].called || got[2].called));
}

TEST_CASE("script_batcher: a worker sends a GCRA key's PEXPIRE at most once a second") {
  // Every write gives the key τ + 1 ms + 1 s (gcra_command.hpp): for a second after a PEXPIRE, the key
  // outlives any arrival time this worker's decisions leave.
  boost::asio::io_context io;
  fake_store store;
  script_batcher batcher(io.get_executor(), store);
  std::vector<counter_op> ops;
  const std::size_t only[] = {0};
  auto decide = [&](std::int64_t after_us, std::int64_t tolerance_us = 5'000) {
    ops = {bucket_op("hot")};
    ops[0].now_us += after_us;
    std::get<ratelimit::limiter::gcra_op>(ops[0].algorithm).tolerance_us = tolerance_us;
    batcher.add(script_group{ops, only, batch_mode::independent}, "hot",
                [](const std::string*, const script_batcher::answer&) {});
    io.restart();
    io.run();
    REQUIRE(!store.sent.empty());
    return count(store.sent.back()->payload, "PEXPIRE");
  };
  CHECK(decide(0) == 1);
  CHECK(store.sent.back()->expected_replies == 2);
  store.sent.back()->done({}, {redis::value{}, integer(1)});
  CHECK(decide(400'000) == 0);
  CHECK(store.sent.back()->expected_replies == 1);
  store.sent.back()->done({}, {redis::value{}});
  CHECK(decide(999'999) == 0);
  store.sent.back()->done({}, {redis::value{}});
  CHECK(decide(1'000'000) == 1);  // a second after the last
  store.sent.back()->done({}, {redis::value{}, integer(1)});
  CHECK(decide(1'100'000, 9'000) == 1);  // a reload gave the bucket a longer tolerance
  store.sent.back()->done({}, {redis::value{}, integer(1)});
  CHECK(decide(1'200'000) == 0);

  SUBCASE("a request that failed may not have set the expiry: the next decision sends it") {
    store.sent.back()->done(boost::asio::error::connection_reset, {});
    CHECK(decide(1'300'000) == 0);  // sent before the failure was known
    store.sent.back()->done({}, {redis::value{}});
    CHECK(decide(3'000'000) == 1);
    store.sent.back()->done(boost::asio::error::connection_reset, {});
    io.restart();
    io.run();  // the batcher forgets on the worker's thread
    CHECK(decide(3'100'000) == 1);
  }
}
