#pragma once
// REDIS_SYNC_INTERVAL: Redis load bounded by keys × workers × instances ÷ interval (two commands each),
// whatever the request rate. One worker's decorator of the Redis backend: fixed and sliding windows are
// decided from the worker's synced_counters, and every interval each counter's unsent hits go to Redis as
// upstream's INCRBY + EXPIRE (negative hits: the refund script), pipelined per store (one key per request on
// a cluster, so that a redirection concerns one key), whose reply is the new global value. A counter the
// worker has not read yet goes to Redis through the exact backend first, as without batching. GCRA ops and
// all-or-nothing batches are not batched: they go to the exact backend.
//
// Redis unreachable: decisions go on from the local counts; unsent hits stay (in at most the worker's share
// of REDIS_SYNC_MAX_KEYS counters) and go out when Redis is back. A flush whose reply is lost (a broken
// connection, REDIS_OP_TIMEOUT) is sent again: hits arrive at least once.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/redis/synced_counters.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "redis/store.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::backends::redis {

// The stats ratelimit.redis_sync.*, and what is logged once over every worker.
struct sync_stats {
  explicit sync_stats(stats::store& s);
  stats::counter& flushes;          // flush requests answered
  stats::counter& flushed_keys;     // counters in them
  stats::counter& flush_errors;     // flush requests failed (their hits are sent again)
  stats::counter& reads;            // counters read from Redis before being decided locally
  stats::counter& dropped_hits;     // hits never sent: refused by Redis, or no room while it was unreachable
  stats::counter& dropped_refunds;  // negative hits never sent, as dropped_hits (stricter: never given back)
  stats::timer& flush_time;         // from sending a flush request to its reply
  std::atomic<int> failing_stores{0};  // (worker, store) pairs failing: logged when it leaves and reaches 0
  std::atomic<bool> dropped_logged{false};
  // Hits the workers' drains ended with, unacknowledged: the process logs their sum once.
  std::atomic<std::int64_t> lost_at_stop{0};
};

class synced_backend final : public limiter::backend {
 public:
  struct options {
    std::chrono::milliseconds interval{50};
    std::size_t max_keys = 1'000'000;  // this worker's share of REDIS_SYNC_MAX_KEYS
    std::size_t keys_per_request = 512;
  };
  // `exact` is the worker's redis_backend over the same stores; `ex` its executor, on which every method is
  // called. `wall` dates windows (the limiter's clock); `steady` times the views' freshness and Redis's
  // failures, so that a clock step cannot make an old view look fresh (null: `wall`, for tests).
  synced_backend(boost::asio::any_io_executor ex, limiter::backend& exact, sluice::redis::store& main,
                 sluice::redis::store* per_second, const core::clock& wall, options o, sync_stats& stats,
                 const core::clock* steady = nullptr);
  ~synced_backend() override;

  void increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                 limiter::completion& done, limiter::batch_mode mode) override;
  void get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done) override;
  // Operator control through the exact backend; inspect adds this worker's unsent hits, overwrite gives them
  // up (synced_counters::overwritten).
  void inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
               limiter::completion& done) override;
  void overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) override;

  // Starts the flushes. Thread-safe.
  void start();
  // Sends every unsent hit now and calls `done` (on the worker's thread) once Redis has answered, or failed:
  // for a stop.
  void drain(std::function<void()> done);
  // No more flushes. Thread-safe.
  void stop();
  const boost::asio::any_io_executor& executor() const { return ex_; }
  // Flushes now (tests; the timer does this every interval).
  void flush();
  // What the timer does every interval: flush, and once a second forget the counters of ended windows.
  void tick();

  // Read from any thread (the gauges), as of the last flush.
  std::int64_t unsent_hits() const { return unsent_mirror_.load(std::memory_order_relaxed); }
  std::size_t keys() const { return keys_mirror_.load(std::memory_order_relaxed); }

 private:
  struct deferred;
  struct exact_call;
  struct passthrough;
  struct inspection;
  struct waiter {
    deferred* request;
    std::size_t index;
  };

  void on_exact(exact_call& call, const limiter::backend_error* error);
  void decide_alone(const limiter::counter_op& op, limiter::op_result& out);
  void send_flush(sluice::redis::store& store, std::vector<synced_counters::flush_item> items);
  // A PING to a failing store with nothing to send: whether it answers again.
  void probe(sluice::redis::store& store);
  void on_flush(sluice::redis::store& store, const std::vector<synced_counters::flush_item>& items,
                boost::system::error_code ec, const std::vector<sluice::redis::value>& replies,
                std::chrono::steady_clock::time_point sent);
  void refused(const synced_counters::flush_item& item, std::string_view why);
  struct store_state {
    bool failing = false;
    std::int64_t failed_at_us = 0;
  };
  void redis_failed(sluice::redis::store& store, std::string_view why);
  void redis_answered(sluice::redis::store& store);
  store_state& state_of(const sluice::redis::store& store);
  store_state& state_for(const limiter::counter_op& op);
  sluice::redis::store& store_for(bool per_second);
  void schedule();
  void check_drained();

  boost::asio::any_io_executor ex_;
  limiter::backend& exact_;
  sluice::redis::store& main_;
  sluice::redis::store* per_second_;
  const core::clock& wall_;
  const core::clock& clock_;  // steady
  options options_;
  std::int64_t interval_us_;
  sync_stats& stats_;
  synced_counters counters_;
  std::unordered_map<synced_counter*, std::vector<waiter>> waiters_;  // in arrival order
  boost::asio::steady_timer timer_;
  std::int64_t last_sweep_ = 0;
  std::size_t flushes_in_flight_ = 0;
  store_state main_state_;
  store_state per_second_state_;
  bool stopped_ = false;
  std::function<void()> draining_;
  std::atomic<std::int64_t> unsent_mirror_{0};
  std::atomic<std::size_t> keys_mirror_{0};
};

}  // namespace sluice::ratelimit::backends::redis
