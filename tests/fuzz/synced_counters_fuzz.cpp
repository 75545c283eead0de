// libFuzzer: batched counting (REDIS_SYNC_INTERVAL) driven by arbitrary input. The input is a list of
// operations on workers' synced backends over one fake Redis that runs the commands: decisions (a key from a
// small set, windows of one to four seconds, hits, negative hits, two ops of one decision, a decision
// started by another's completion), flushes and the timer's ticks (which forget the counters of ended
// windows), time passing, Redis going down or holding its answers, held answers given or lost (before or
// after Redis applied them), drains. Checked: every decision completes exactly once; once Redis is up and
// everything is flushed, nothing is left unsent. With the first byte even, one worker decides alone with room
// for every key (without room, a key goes to Redis as without batching, where no over-limit cache keeps hits
// out), and then each decision must be exactly what Redis itself would have answered (upstream's counting
// with its local over-limit cache), outages and requests never written included (not a connection lost
// before a reply: its hits may count twice, its refunds are not sent again). With several workers and the
// second bit of the first byte set, no limit is reached, and each key must end with its hits minus what was
// given back, as long as nothing forced an order on it: no refund found another worker's hits unsent (no view
// can see those) or larger than the key's count, and no hit or negative hit was dropped or counted twice. A
// refund larger than a worker's stale view must still take back the others' hits that reached Redis.
//
// Build and run: scripts/fuzz synced_counters [seconds]

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../support/fake_redis.hpp"
#include "core/clock.hpp"
#include "core/log.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/backends/redis/synced_backend.hpp"
#include "stats/store.hpp"

namespace {

using namespace sluice;
namespace rr = ratelimit::backends::redis;
using ratelimit::limiter::counter_op;
using ratelimit::limiter::op_result;

constexpr std::int64_t start_seconds = 1'795'000'000;
constexpr std::uint64_t low_limit = 20, unreached_limit = 1'000'000;
const char* const key_names[] = {"k0", "k1", "k2", "k3", "k4"};

struct decision final : ratelimit::limiter::completion {
  std::vector<counter_op> ops;
  std::vector<op_result> results;
  int completions = 0;
  std::function<void()> then;  // started from the completion, as a service's next request may be
  void complete(const ratelimit::limiter::backend_error*) noexcept override {
    ++completions;
    if (then) std::exchange(then, nullptr)();
  }
};

struct worker {
  worker(boost::asio::io_context& ioc, test::fake_redis& redis, const core::clock& clock,
         rr::sync_stats& sync, std::size_t max_keys)
      : exact(ioc.get_executor(), redis, nullptr),
        synced(ioc.get_executor(), exact, redis, nullptr, clock, {std::chrono::milliseconds(50), max_keys, 3},
               sync) {}
  rr::redis_backend exact;
  rr::synced_backend synced;
};

// Upstream's counting of one key by one decider, with the local over-limit cache.
struct reference {
  std::int64_t count = 0;
  bool over = false;
  std::uint64_t apply(const counter_op& op) {
    if (op.refund) {
      count -= std::min<std::int64_t>(count, static_cast<std::int64_t>(op.increment));
      if (count <= static_cast<std::int64_t>(op.limit())) over = false;
      return static_cast<std::uint64_t>(count);
    }
    const std::uint64_t value = static_cast<std::uint64_t>(count) + op.increment;
    if (!over) {
      count += static_cast<std::int64_t>(op.increment);
      over = count > static_cast<std::int64_t>(op.limit());
    }
    return value;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const bool quiet = [] {
    core::log_init(core::log_level::error, false);
    return true;
  }();
  (void)quiet;
  const bool solo = (data[0] & 1) == 0;
  const bool summed = !solo && (data[0] & 2) != 0;  // several workers, checked against the keys' sums
  const std::uint64_t limit = summed ? unreached_limit : low_limit;
  boost::asio::io_context ioc;
  test::fake_redis redis;
  core::fake_clock clock(start_seconds);
  stats::store stats;
  rr::sync_stats sync(stats);
  std::deque<worker> workers;
  const std::size_t count = solo ? 1 : 1 + data[0] % 3;
  for (std::size_t i = 0; i < count; ++i) workers.emplace_back(ioc, redis, clock, sync, solo ? 1'000'000 : 2);
  std::deque<decision> decisions;
  std::deque<std::string> names;  // the ops' keys
  std::map<std::string, reference, std::less<>> model;
  std::vector<std::uint64_t> expected;  // solo: each decision's first op's value
  // summed: each key's hits minus what was given back, in the order the ops started, and whether that order
  // is one the workers could have known (see the top).
  std::map<std::string, std::int64_t, std::less<>> sums;
  bool ordered = true;
  auto run = [&] {
    ioc.restart();
    ioc.poll();
  };
  // Starts a decision; alone, what Redis itself would answer is worked out now, in the order decisions start.
  std::function<void(rr::synced_backend&, std::vector<counter_op>)> start = [&](rr::synced_backend& w,
                                                                                std::vector<counter_op> ops) {
    auto& d = decisions.emplace_back();
    d.ops = std::move(ops);
    d.results.resize(d.ops.size());
    if (solo) {
      expected.push_back(model[std::string(d.ops[0].key)].apply(d.ops[0]));
      for (std::size_t i = 1; i < d.ops.size(); ++i) model[std::string(d.ops[i].key)].apply(d.ops[i]);
    }
    if (summed) {
      for (const auto& op : d.ops) {
        auto& sum = sums[std::string(op.key)];
        const auto hits = static_cast<std::int64_t>(op.increment);
        if (!op.refund) {
          sum += hits;
          continue;
        }
        const bool others_sent = std::ranges::all_of(workers, [&](const worker& other) {
          return &other.synced == &w || other.synced.unsent_hits() == 0;
        });
        ordered = ordered && others_sent && redis.held.empty() && hits <= sum;
        sum -= std::min(sum, hits);
      }
    }
    w.increment(d.ops, d.results, d, ratelimit::limiter::batch_mode::independent);
  };
  bool lost_replies = false;  // a reply lost after Redis applied it: those hits count twice

  for (std::size_t at = 1; at + 1 < size; at += 2) {
    const std::uint8_t a = data[at], b = data[at + 1];
    auto& w = workers[b % workers.size()].synced;
    switch (a % 8) {
      case 0:
      case 1:
      case 2: {  // a decision of one or two ops; some start another from their completion
        // As the limiter does, at the time it is made: a window of 1 to 4 seconds, its start in the key.
        auto make_op = [&names, &clock, limit](std::uint8_t a, std::uint8_t b, std::size_t which) {
          const std::int64_t window = 1 + (b >> 6), now = clock.now_seconds();
          counter_op op;
          op.key = names.emplace_back(std::string(key_names[(b >> (3 * which)) % 5]) + "_" +
                                      std::to_string(window) + "_" + std::to_string(now - now % window));
          op.increment = (a >> 3) % 4;
          op.refund = (a >> 5) % 5 == 0;
          op.algorithm = ratelimit::limiter::fixed_window_op{limit, now - now % window + window};
          op.ttl_seconds = 60;
          op.now_us = clock.now_micros();
          return op;
        };
        std::vector<counter_op> ops{make_op(a, b, 0)};
        if (a % 8 == 2) ops.push_back(make_op(a, b, 1));
        start(w, std::move(ops));
        if ((a >> 7) != 0 && decisions.back().completions == 0) {
          // (Made when it starts: a request's ops are made with its decision, never ahead of it.)
          decisions.back().then = [&start, &w, make_op, a, b] { start(w, {make_op(a, b, 1)}); };
        }
        break;
      }
      case 3:
        if (b % 2 == 0) {
          w.flush();
        } else {
          w.tick();
        }
        break;
      case 4:
        clock.advance_micros(static_cast<std::int64_t>(b) * 1'000);
        break;
      case 5:
        redis.down = !redis.down;
        break;
      case 6:
        redis.hold = b % 2 == 0;
        if (b % 4 == 1) {
          using end = test::fake_redis::held_end;
          const auto how = b % 8 != 5     ? end::answered
                           : b % 16 == 5  ? end::never_written
                           : b % 32 == 13 ? end::lost_before_run
                                          : end::lost_after_run;
          // (Redis may have run them: hits are sent again, refunds not; so counts are not exact.)
          lost_replies = lost_replies || (how >= end::lost_before_run && !redis.held.empty());
          redis.answer_held(how);
        }
        break;
      case 7:
        w.drain([] {});
        break;
    }
    run();
  }

  // Redis up and answering: everything reaches it.
  redis.down = false;
  redis.hold = false;
  for (int round = 0; round < 4; ++round) {
    redis.answer_held();
    run();
    for (auto& w : workers) w.synced.flush();
    run();
  }
  for (const auto& d : decisions) {
    if (d.completions != 1) std::abort();
  }
  for (auto& w : workers) {
    if (w.synced.unsent_hits() != 0) std::abort();
  }
  // (Hits or negative hits dropped: a worker decided them alone, with no room for a counter while Redis
  // failed.)
  const bool dropped = sync.dropped_hits.value() != 0 || sync.dropped_refunds.value() != 0;
  if (summed && ordered && !lost_replies && !dropped) {
    for (const auto& [key, sum] : sums) {
      if (redis.value(key) != sum) std::abort();
    }
  }
  if (solo && !lost_replies) {
    for (std::size_t i = 0; i < decisions.size(); ++i) {
      if (decisions[i].results[0].value != expected[i]) std::abort();
    }
    for (const auto& [key, ref] : model) {
      if (redis.value(key) != ref.count) std::abort();
    }
  }
  return 0;
}
