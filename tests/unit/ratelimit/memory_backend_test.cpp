#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"

using namespace sluice;
using ratelimit::backends::memory::memory_backend;
using ratelimit::limiter::backend_error;
using ratelimit::limiter::batch_mode;
using ratelimit::limiter::counter_op;
using ratelimit::limiter::op_result;

namespace {

struct recorder final : ratelimit::limiter::completion {
  int calls = 0;
  std::optional<std::string> error;
  void complete(const backend_error* e) noexcept override {
    ++calls;
    if (e != nullptr) error = e->message;
  }
};

counter_op count_op(std::string_view key, std::uint64_t by, std::uint32_t ttl) {
  counter_op op;
  op.key = key;
  op.increment = by;
  op.ttl_seconds = ttl;
  return op;
}

std::uint64_t incr(memory_backend& b, std::string_view key, std::uint64_t by, std::uint32_t ttl = 60) {
  counter_op op = count_op(key, by, ttl);
  op_result out;
  recorder r;
  b.increment({&op, 1}, {&out, 1}, r, batch_mode::independent);
  REQUIRE(r.calls == 1);
  REQUIRE_FALSE(r.error);
  return out.value;
}

}  // namespace

TEST_CASE("increments return the value after, and 0 increments only read") {
  core::fake_clock clock(1000);
  memory_backend b(clock, 10'000);
  CHECK(incr(b, "a", 1) == 1);
  CHECK(incr(b, "a", 5) == 6);
  CHECK(incr(b, "a", 0) == 6);
  CHECK(incr(b, "b", 0) == 0);

  counter_op ops[2] = {count_op("a", 0, 60), count_op("missing", 0, 60)};
  op_result values[2] = {{99, 0}, {99, 0}};
  recorder r;
  b.get(ops, values, r);
  CHECK(r.calls == 1);
  CHECK(values[0].value == 6);
  CHECK(values[1].value == 0);
}

TEST_CASE("a counter expires after its TTL, refreshed by every increment like EXPIRE") {
  core::fake_clock clock(1000);
  memory_backend b(clock, 10'000);
  CHECK(incr(b, "k", 3, 10) == 3);
  clock.advance(9);
  CHECK(incr(b, "k", 1, 10) == 4);  // TTL now runs to 1019
  clock.advance(9);
  CHECK(incr(b, "k", 1, 10) == 5);
  clock.advance(10);
  CHECK(incr(b, "k", 1, 10) == 1);  // expired: a fresh counter
}

TEST_CASE("sweep reclaims expired counters") {
  core::fake_clock clock(1000);
  memory_backend b(clock, 10'000);
  for (int i = 0; i < 100; ++i) incr(b, "short" + std::to_string(i), 1, 5);
  for (int i = 0; i < 50; ++i) incr(b, "long" + std::to_string(i), 1, 500);
  CHECK(b.size() == 150);
  clock.advance(6);
  CHECK(b.sweep() == 100);
  CHECK(b.size() == 50);
}

TEST_CASE("a full backend refuses new counters with an error naming the setting, and recovers after expiry") {
  core::fake_clock clock(1000);
  memory_backend b(clock, 1024);
  recorder r;
  std::vector<std::string> keys;
  std::size_t accepted = 0;
  for (int i = 0; i < 4000 && !r.error; ++i) {
    keys.push_back("key" + std::to_string(i));
    counter_op op = count_op(keys.back(), 1, 30);
    op_result out;
    b.increment({&op, 1}, {&out, 1}, r, batch_mode::independent);
    if (!r.error) ++accepted;
  }
  REQUIRE(r.error);
  CHECK(*r.error == "memory backend is full: 1024 live counters (raise MEMORY_MAX_COUNTERS)");
  CHECK(accepted == 1024);
  // Existing counters still count while full.
  CHECK(incr(b, keys.front(), 1, 30) == 2);
  clock.advance(31);
  CHECK(incr(b, "after-expiry", 1) == 1);
}

TEST_CASE("a full backend reclaims expired counters everywhere for an all-or-nothing batch too") {
  core::fake_clock clock(1000);
  memory_backend b(clock, 1024);
  for (int i = 0; i < 1024; ++i) incr(b, "key" + std::to_string(i), 1, 30);
  clock.advance(31);  // every counter expired, in shards other than the new keys' (mostly)
  std::array<counter_op, 2> ops{count_op("new-a", 1, 30), count_op("new-b", 1, 30)};
  for (auto& op : ops) op.algorithm = ratelimit::limiter::fixed_window_op{10, 0};
  std::array<op_result, 2> out{};
  recorder r;
  b.increment(ops, out, r, batch_mode::all_or_nothing);
  CHECK_FALSE(r.error);
  CHECK(out[0].value == 1);
  CHECK(incr(b, "new-b", 1, 30) == 2);
}

TEST_CASE("concurrent increments from several threads are all counted") {
  core::fake_clock clock(1000);
  memory_backend b(clock, 10'000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&b, t] {
      for (int i = 0; i < 5000; ++i) {
        incr(b, "shared", 1);
        incr(b, "own" + std::to_string(t), 1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(incr(b, "shared", 0) == 20'000);
  CHECK(incr(b, "own3", 0) == 5000);
}
