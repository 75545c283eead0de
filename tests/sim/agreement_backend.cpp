#include "agreement_backend.hpp"

#include <string>

namespace sluice::sim {

namespace limiter = ratelimit::limiter;

namespace {

// Past any run's virtual horizon (a counter's TTL in Redis is counted by Redis's own clock).
constexpr std::uint32_t far_ttl_seconds = 30 * 24 * 3600;

struct inline_completion final : limiter::completion {
  bool failed = false;
  void complete(const limiter::backend_error* e) noexcept override { failed = e != nullptr; }
};

std::string describe(const limiter::counter_op& op) {
  static constexpr const char* kinds[] = {"fixed_window", "sliding_window", "gcra", "leases", "holder"};
  return std::string(kinds[op.algorithm.index()]) + " op on " + std::string(op.key) + " (" +
         (op.refund ? "-" : "") + std::to_string(op.increment) + " hits" + (op.usage ? ", usage" : "") + ")";
}

}  // namespace

// One call on its way through Redis: the ops as sent (their TTLs raised), and the limiter's completion.
struct agreement_backend::call final : limiter::completion {
  agreement_backend* owner = nullptr;
  std::list<std::unique_ptr<call>>::iterator self;
  std::vector<limiter::counter_op> ops;
  std::span<limiter::op_result> results;
  limiter::completion* done = nullptr;
  std::optional<limiter::batch_mode> mode;  // none: a get

  void complete(const limiter::backend_error* e) noexcept override {
    if (e == nullptr) owner->compare(*this);
    done->complete(e);
    owner->calls_.erase(self);  // (this is gone)
  }
};

agreement_backend::agreement_backend(limiter::backend& redis, limiter::backend& memory,
                                     const core::clock& clock, checker& check)
    : redis_(redis), memory_(memory), clock_(clock), check_(check) {}

agreement_backend::~agreement_backend() = default;

void agreement_backend::increment(std::span<const limiter::counter_op> ops,
                                  std::span<limiter::op_result> results, limiter::completion& done,
                                  limiter::batch_mode mode) {
  start(ops, results, done, mode);
}

void agreement_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                            limiter::completion& done) {
  start(ops, results, done, std::nullopt);
}

void agreement_backend::start(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                              limiter::completion& done, std::optional<limiter::batch_mode> mode) {
  auto& c = *calls_.emplace_back(std::make_unique<call>());
  c.owner = this;
  c.self = std::prev(calls_.end());
  c.ops.assign(ops.begin(), ops.end());
  for (auto& op : c.ops)
    if (op.kind() == limiter::op_kind::count || op.kind() == limiter::op_kind::sliding)
      op.ttl_seconds = far_ttl_seconds;
  c.results = results;
  c.done = &done;
  c.mode = mode;
  if (mode)
    redis_.increment(c.ops, results, c, *mode);
  else
    redis_.get(c.ops, results, c);
}

void agreement_backend::compare(const call& c) {
  std::vector<limiter::op_result> expected(c.ops.size());
  inline_completion memory_done;
  if (c.mode)
    memory_.increment(c.ops, expected, memory_done, *c.mode);
  else
    memory_.get(c.ops, expected, memory_done);
  const std::int64_t at = clock_.now_micros() - start_us;
  if (!check_.expect(!memory_done.failed, at, "the memory store refused what Redis took")) return;
  for (std::size_t i = 0; i < c.ops.size(); ++i) {
    const auto& op = c.ops[i];
    const auto& got = c.results[i];
    const auto& want = expected[i];
    const bool concurrency = op.kind() == limiter::op_kind::concurrency;
    if (!c.mode && concurrency) continue;  // (a get reads ahead for fixed windows only)
    const bool same =
        got.value == want.value &&
        (op.kind() != limiter::op_kind::sliding || got.previous == want.previous) &&
        (!concurrency || (got.before == want.before && got.expired == want.expired &&
                          got.oldest_end_us == want.oldest_end_us && got.holders == want.holders &&
                          got.holder_slots == want.holder_slots));
    check_.expect(same, at, "C++ and Lua disagree on a ", describe(op), ": Redis value ", got.value,
                  ", previous ", got.previous, ", before ", got.before, ", expired ", got.expired,
                  ", oldest lease end ", got.oldest_end_us, ", holders ", got.holders, "; memory ",
                  want.value, ", ", want.previous, ", ", want.before, ", ", want.expired, ", ",
                  want.oldest_end_us, ", ", want.holders);
  }
}

}  // namespace sluice::sim
