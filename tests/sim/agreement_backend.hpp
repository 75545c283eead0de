#pragma once
// The Redis legs' check that C++ and Lua agree: between a worker's limiter and its Redis backend, it passes
// each call on and, when Redis has answered, applies the same ops to a memory store (limiter/algorithms.hpp's
// arithmetic in C++) and checks that every op's result is the same, operation by operation.
//
// Redis expires keys by its own clock, not the virtual one. So counters' TTLs are raised past any run's
// virtual horizon here (a key's window is in its name: a window that ended is never read again), the memory
// store's clock stands still (it expires nothing either), and expiry is judged by virtual time alone: the
// script and the arithmetic take `now` from each op. The TTLs that follow from an op's other fields (a GCRA
// bucket's tolerance, a lease) are not changed: the Redis legs use limits whose keys live half a minute of
// real time or more (GCRA buckets of 36 s and more, leases of a minute and more), while a seed runs for
// seconds and its virtual time runs hundreds of times faster than real time, so no key is expired by Redis's
// clock before virtual time has passed all it counts.

#include <list>
#include <memory>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "sim.hpp"

namespace sluice::sim {

class agreement_backend final : public ratelimit::limiter::backend {
 public:
  // `clock` is the virtual one (for the failure's time); `check` gets one check per op compared.
  agreement_backend(ratelimit::limiter::backend& redis, ratelimit::limiter::backend& memory,
                    const core::clock& clock, checker& check);
  ~agreement_backend() override;

  void increment(std::span<const ratelimit::limiter::counter_op> ops,
                 std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done,
                 ratelimit::limiter::batch_mode mode) override;
  void get(std::span<const ratelimit::limiter::counter_op> ops,
           std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done) override;
  void inspect(std::span<const ratelimit::limiter::counter_op> ops,
               std::span<ratelimit::limiter::op_result> results,
               ratelimit::limiter::completion& done) override {
    redis_.inspect(ops, results, done);
  }
  void overwrite(std::span<const ratelimit::limiter::counter_op> ops,
                 ratelimit::limiter::completion& done) override {
    redis_.overwrite(ops, done);
  }

 private:
  struct call;
  void start(std::span<const ratelimit::limiter::counter_op> ops,
             std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done,
             std::optional<ratelimit::limiter::batch_mode> mode);
  void compare(const call& c);

  ratelimit::limiter::backend& redis_;
  ratelimit::limiter::backend& memory_;
  const core::clock& clock_;
  checker& check_;
  std::list<std::unique_ptr<call>> calls_;  // sent to Redis, not answered yet
};

}  // namespace sluice::sim
