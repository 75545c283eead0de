#pragma once
// What a leg runs its workload on: several instances' workers, each a rate limit service with its own
// limiter, over one memory store (the memory backend decides inline: a decision is one call), under one
// virtual clock. A variant may give the limiters a skewed clock.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"

namespace sluice::sim {

using rls_request = ratelimit::service::rls_request;
using rls_response = ratelimit::service::rls_response;

// A clock `skew_us` ahead of another (a known-wrong variant's limiter).
class skewed_clock final : public core::clock {
 public:
  skewed_clock(const core::clock& base, std::int64_t skew_us) : base_(base), skew_us_(skew_us) {}
  std::int64_t now_micros() const override { return base_.now_micros() + skew_us_; }

 private:
  const core::clock& base_;
  std::int64_t skew_us_;
};

// A known-wrong variant of the arithmetic, between the limiters and the store: it changes each operation
// before the store applies it (the simulator's own code: nothing of it is in sluice).
class variant_backend final : public ratelimit::limiter::backend {
 public:
  // "gcra bucket one deeper": a GCRA op's tolerance one interval longer; "holder lease one second short": a
  // holder's lease a second shorter.
  variant_backend(ratelimit::limiter::backend& real, std::string variant)
      : real_(real), variant_(std::move(variant)) {}
  static bool changes_ops(const std::string& variant);

  void increment(std::span<const ratelimit::limiter::counter_op> ops,
                 std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done,
                 ratelimit::limiter::batch_mode mode) override;
  void get(std::span<const ratelimit::limiter::counter_op> ops,
           std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done) override;
  void inspect(std::span<const ratelimit::limiter::counter_op> ops,
               std::span<ratelimit::limiter::op_result> results,
               ratelimit::limiter::completion& done) override;
  void overwrite(std::span<const ratelimit::limiter::counter_op> ops,
                 ratelimit::limiter::completion& done) override;

 private:
  std::vector<ratelimit::limiter::counter_op> changed(
      std::span<const ratelimit::limiter::counter_op> ops) const;
  ratelimit::limiter::backend& real_;
  std::string variant_;
};

class world {
 public:
  // `workers` services on one store, with the rules of `yaml`. `variant` (self-check): "window off by one
  // second" gives the limiters a clock a second ahead; variant_backend's change the store's ops. Throws
  // std::runtime_error when the rules do not load.
  world(const std::string& yaml, int workers, const std::string& variant = "");

  core::fake_clock clock{0};
  int workers() const { return static_cast<int>(services_.size()); }
  // Decides on worker `w` at the clock's time; throws std::runtime_error when the service refuses it.
  rls_response decide(int w, const rls_request& request);

 private:
  stats::store stats_;
  skewed_clock limiter_clock_;
  ratelimit::backends::memory::memory_backend store_;
  std::unique_ptr<variant_backend> variant_;  // null but for a variant that changes ops
  std::vector<std::unique_ptr<ratelimit::limiter::limiter>> limiters_;
  std::vector<std::unique_ptr<ratelimit::service::rate_limit_service>> services_;
};

// A request of one descriptor, its entries in order; `hits` is hits_addend (0: one).
rls_request make_request(const std::string& domain,
                         const std::vector<std::pair<std::string, std::string>>& entries,
                         std::uint32_t hits = 0, bool negative = false);

}  // namespace sluice::sim
