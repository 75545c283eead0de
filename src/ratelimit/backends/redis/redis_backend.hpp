#pragma once
// BACKEND_TYPE=redis: counters in Redis with upstream's commands, so Sluice and envoyproxy/ratelimit can
// share one Redis: per key INCRBY <key> <hits> then EXPIRE <key> <unit + jitter>; GET for
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT; a small EVAL script for negative hits. All keys of a decision go
// in one pipeline per store — or, on a Redis Cluster, one request per key (INCRBY and EXPIRE together), each
// to its node, all in parallel. With a per-second store (REDIS_PERSECOND), keys of SECOND limits go there.
// Sliding windows add one MGET of their previous windows to the pipeline (and a DECRBY, not waited for, of
// hits they did not admit), until the previous window is final (previous_counts.hpp). GCRA ops and
// all-or-nothing batches are groups of decide_script, gathered per worker turn by a script_batcher into one
// call per store (per slot on a cluster); GCRA ops on keys no other op of the turn touches go in that round
// trip as BITFIELDs instead (gcra_command.hpp).

#include <boost/asio/any_io_executor.hpp>
#include <memory>

#include "ratelimit/backends/redis/previous_counts.hpp"
#include "ratelimit/backends/redis/script_batcher.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class redis_backend final : public limiter::backend {
 public:
  // `per_second` may be null: then every key goes to `main`. `ex` is the executor of the worker whose
  // decisions this backend serves: script batches are flushed there.
  redis_backend(boost::asio::any_io_executor ex, sluice::redis::store& main,
                sluice::redis::store* per_second);
  ~redis_backend() override;

  // upstream's span around the pipelines: two commands per key (INCRBY and EXPIRE) in each.
  limiter::trace_description describe_for_trace(std::span<const limiter::counter_op> ops) const override;

  void increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                 limiter::completion& done, limiter::batch_mode mode) override;
  void get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done) override;
  // (operator_control.cpp) One request per key, routed by it: GET, HGETALL; SET, DEL, HSET.
  void inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
               limiter::completion& done) override;
  void overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) override;

  // A store, the batcher of its script calls, and the final previous-window counts read from it.
  struct store_pair {
    store_pair(boost::asio::any_io_executor ex, sluice::redis::store& s)
        : store(s), scripts(std::move(ex), s) {}
    sluice::redis::store& store;
    script_batcher scripts;
    previous_counts previous;
  };

 private:
  void run(bool get, std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done, limiter::batch_mode mode);

  sluice::redis::store& store_for(const limiter::counter_op& op) const {
    return op.per_second && per_second_ ? per_second_->store : main_->store;
  }

  std::unique_ptr<store_pair> main_;
  std::unique_ptr<store_pair> per_second_;
};

}  // namespace sluice::ratelimit::backends::redis
