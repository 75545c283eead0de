#pragma once
// BACKEND_TYPE=redis: counters in Redis with upstream's commands, so Sluice and envoyproxy/ratelimit can
// share one Redis: per key INCRBY <key> <hits> then EXPIRE <key> <unit + jitter>; GET for
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT; a small EVAL script for negative hits. All keys of a decision go
// in one pipeline per store — or, on a Redis Cluster, one request per key (INCRBY and EXPIRE together), each
// to its node, all in parallel. With a per-second store (REDIS_PERSECOND), keys of SECOND limits go there.
// Sliding-window and GCRA ops are one call of decide_script each, in the same pipeline; an all-or-nothing
// batch is one call per store (per slot on a cluster).

#include "ratelimit/limiter/backend.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class redis_backend final : public limiter::backend {
 public:
  // `per_second` may be null: then every key goes to `main`.
  redis_backend(sluice::redis::store& main, sluice::redis::store* per_second)
      : main_(main), per_second_(per_second) {}

  // upstream's span around the pipelines: two commands per key (INCRBY and EXPIRE) in each.
  limiter::trace_description describe_for_trace(std::span<const limiter::counter_op> ops) const override;

  void increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                 limiter::completion& done, limiter::batch_mode mode) override;
  void get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done) override;

 private:
  // what: 0 GET, 1 each op on its own, 2 one script per store (per slot on a cluster)
  void run(int what, std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
           limiter::completion& done, limiter::batch_mode mode);

  sluice::redis::store& main_;
  sluice::redis::store* per_second_;
};

}  // namespace sluice::ratelimit::backends::redis
