#include "ratelimit/backends/redis/synced_backend.hpp"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/container/small_vector.hpp>
#include <optional>

#include "core/log.hpp"
#include "ratelimit/limiter/algorithms.hpp"

namespace sluice::ratelimit::backends::redis {

namespace asio = boost::asio;
namespace rd = sluice::redis;

sync_stats::sync_stats(stats::store& s)
    : flushes(s.get_counter("ratelimit.redis_sync.flushes")),
      flushed_keys(s.get_counter("ratelimit.redis_sync.flushed_keys")),
      flush_errors(s.get_counter("ratelimit.redis_sync.flush_errors")),
      reads(s.get_counter("ratelimit.redis_sync.reads")),
      dropped_hits(s.get_counter("ratelimit.redis_sync.dropped_hits")),
      dropped_refunds(s.get_counter("ratelimit.redis_sync.dropped_refunds")),
      flush_time(s.get_timer("ratelimit.redis_sync.flush_time")) {}

// A decision some of whose ops wait for Redis: it completes when the last of them is decided.
struct synced_backend::deferred {
  deferred(limiter::completion& d, std::span<const limiter::counter_op> o, std::span<limiter::op_result> r)
      : done(d), ops(o), results(r) {}
  limiter::completion& done;
  std::span<const limiter::counter_op> ops;
  std::span<limiter::op_result> results;
  std::size_t outstanding = 1;  // held while the ops are routed
  std::optional<limiter::backend_error> error;

  void fail(const limiter::backend_error& e) {
    if (!error) error = e;
  }
  void finish_one() {
    if (--outstanding != 0) return;
    if (error) {
      const limiter::backend_error e{std::move(*error)};
      done.complete(&e);
    } else {
      done.complete(nullptr);
    }
    delete this;
  }
};

// Ops of one decision sent to the exact backend: reads of counters (decided locally should Redis be
// unreachable), or ops that are never batched (their failure is the decision's).
struct synced_backend::exact_call final : limiter::completion {
  exact_call(synced_backend& o, deferred& r, bool f, bool g) : owner(o), request(r), fallback(f), get(g) {}
  synced_backend& owner;
  deferred& request;
  bool fallback;
  bool get;
  boost::container::small_vector<limiter::counter_op, 4> ops;
  boost::container::small_vector<limiter::op_result, 4> results;
  boost::container::small_vector<std::size_t, 4> index;
  boost::container::small_vector<synced_counter*, 4> counters;  // null: no counter in the table

  void add(std::size_t i, synced_counter* c) {
    ops.push_back(request.ops[i]);
    results.emplace_back();
    index.push_back(i);
    counters.push_back(c);
  }
  void complete(const limiter::backend_error* error) noexcept override {
    std::optional<limiter::backend_error> failure;
    if (error != nullptr) failure = *error;
    asio::dispatch(owner.ex_, [this, failure = std::move(failure)] {
      owner.on_exact(*this, failure ? &*failure : nullptr);
    });
  }
};

// An all-or-nothing batch, sent to the exact backend as a whole: once it is answered, the hits it counted are
// added to the views of the counters this worker holds (their next flush's reply would bring them anyway;
// until then the view would miss them).
struct synced_backend::passthrough final : limiter::completion {
  passthrough(synced_backend& o, limiter::completion& d, std::span<const limiter::counter_op> op,
              std::span<limiter::op_result> r, limiter::batch_mode m)
      : owner(o), done(d), ops(op), results(r), mode(m) {}
  synced_backend& owner;
  limiter::completion& done;
  std::span<const limiter::counter_op> ops;
  std::span<limiter::op_result> results;
  limiter::batch_mode mode;

  void complete(const limiter::backend_error* error) noexcept override {
    std::optional<limiter::backend_error> failure;
    if (error != nullptr) failure = *error;
    asio::dispatch(owner.ex_, [this, failure = std::move(failure)] {
      if (!failure) owner.counters_.add_applied(ops, results, mode == limiter::batch_mode::evaluate_only);
      done.complete(failure ? &*failure : nullptr);
      delete this;
    });
  }
};

// An inspection answered by the exact backend: this worker's unsent hits are added on its thread.
struct synced_backend::inspection final : limiter::completion {
  inspection(synced_backend& o, limiter::completion& d, std::span<const limiter::counter_op> op,
             std::span<limiter::op_result> r)
      : owner(o), done(d), ops(op), results(r) {}
  synced_backend& owner;
  limiter::completion& done;
  std::span<const limiter::counter_op> ops;
  std::span<limiter::op_result> results;

  void complete(const limiter::backend_error* error) noexcept override {
    std::optional<limiter::backend_error> failure;
    if (error != nullptr) failure = *error;
    asio::dispatch(owner.ex_, [this, failure = std::move(failure)] {
      if (!failure) {
        for (std::size_t i = 0; i < ops.size(); ++i) {
          if (limiter::decided_in_store(ops[i])) continue;
          const std::int64_t v =
              static_cast<std::int64_t>(results[i].value) + owner.counters_.pending_of(ops[i].key);
          results[i].value = v > 0 ? static_cast<std::uint64_t>(v) : 0;
        }
      }
      done.complete(failure ? &*failure : nullptr);
      delete this;
    });
  }
};

void synced_backend::inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                             limiter::completion& done) {
  exact_.inspect(ops, results, *new inspection(*this, done, ops, results));
}

void synced_backend::overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) {
  for (const auto& op : ops) {
    if (limiter::decided_in_store(op)) continue;
    counters_.overwritten(op.key, op.increment);
    if (const auto* sliding = op.as<limiter::sliding_window_op>())
      counters_.overwritten(sliding->previous_key, 0);
  }
  exact_.overwrite(ops, done);
}

synced_backend::synced_backend(asio::any_io_executor ex, limiter::backend& exact, rd::store& main,
                               rd::store* per_second, const core::clock& wall, options o, sync_stats& stats,
                               const core::clock* steady)
    : ex_(ex),
      exact_(exact),
      main_(main),
      per_second_(per_second),
      wall_(wall),
      clock_(steady != nullptr ? *steady : wall),
      options_(o),
      interval_us_(std::chrono::duration_cast<std::chrono::microseconds>(o.interval).count()),
      stats_(stats),
      counters_(o.max_keys, interval_us_),
      timer_(ex) {}

synced_backend::~synced_backend() = default;

void synced_backend::increment(std::span<const limiter::counter_op> ops,
                               std::span<limiter::op_result> results, limiter::completion& done,
                               limiter::batch_mode mode) {
  // All-or-nothing batches need every counter checked and changed in Redis in one step.
  if (mode != limiter::batch_mode::independent) {
    return exact_.increment(ops, results, *new passthrough(*this, done, ops, results, mode), mode);
  }
  if (std::ranges::all_of(ops, limiter::decided_in_store)) return exact_.increment(ops, results, done, mode);
  const std::int64_t now = clock_.now_micros();
  deferred* request = nullptr;
  exact_call* reads = nullptr;   // counters to read, and ops without room in the table
  exact_call* direct = nullptr;  // GCRA
  auto call = [&](exact_call*& c, bool fallback) {
    if (request == nullptr) request = new deferred(done, ops, results);
    if (c == nullptr) c = new exact_call(*this, *request, fallback, false);
    return c;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (limiter::decided_in_store(op)) {
      call(direct, false)->add(i, nullptr);
      continue;
    }
    const auto found = counters_.find(op, now, state_for(op).failing);
    switch (found.how) {
      case synced_counters::route::local:
        counters_.decide(*found.counter, op, results[i]);
        break;
      case synced_counters::route::read:
      case synced_counters::route::full:
        call(reads, true)->add(i, found.counter);
        break;
      case synced_counters::route::wait:
        if (request == nullptr) request = new deferred(done, ops, results);
        ++request->outstanding;
        waiters_[found.counter].push_back(waiter{request, i});
        break;
    }
  }
  unsent_mirror_.store(counters_.unsent(), std::memory_order_relaxed);
  keys_mirror_.store(counters_.size(), std::memory_order_relaxed);
  if (request == nullptr) return done.complete(nullptr);
  for (auto* c : {reads, direct}) {
    if (c == nullptr) continue;
    ++request->outstanding;
    exact_.increment(c->ops, c->results, *c, limiter::batch_mode::independent);
  }
  request->finish_one();
}

void synced_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                         limiter::completion& done) {
  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's read ahead: counters with a view answer from it.
  const std::int64_t now = clock_.now_micros();
  deferred* request = nullptr;
  exact_call* reads = nullptr;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    auto* counter =
        limiter::decided_in_store(op) ? nullptr : counters_.usable(op, now, state_for(op).failing);
    if (counter != nullptr) {
      results[i].value = counter->view();
      results[i].previous = counter->previous;
      continue;
    }
    if (request == nullptr) request = new deferred(done, ops, results);
    if (reads == nullptr) reads = new exact_call(*this, *request, true, true);
    reads->add(i, nullptr);
  }
  if (request == nullptr) return done.complete(nullptr);
  ++request->outstanding;
  exact_.get(reads->ops, reads->results, *reads);
  request->finish_one();
}

// An op decided with no counter (no room in the table while Redis is unreachable): from its own hits alone,
// which are then dropped (negative hits too: not given back, stricter).
void synced_backend::decide_alone(const limiter::counter_op& op, limiter::op_result& out) {
  const bool admitted = limiter::evaluate(op, 0, 0, out);
  if (op.refund) return stats_.dropped_refunds.add(op.increment);
  if (!limiter::applies(op, admitted)) return;
  stats_.dropped_hits.add(op.increment);
  if (!stats_.dropped_logged.exchange(true)) {
    core::log_warn(
        "REDIS_SYNC_MAX_KEYS counters are held while Redis is unreachable: hits of other keys are "
        "decided alone and not kept (ratelimit.redis_sync.dropped_hits counts them)");
  }
}

void synced_backend::on_exact(exact_call& call, const limiter::backend_error* error) {
  auto& request = call.request;
  const std::int64_t now = clock_.now_micros();
  // Unreachable (or not taking writes now): decided from what the counters hold. Refused for good (a key that
  // is not a counter): the decision fails, as without batching.
  const bool outage = error != nullptr && !error->refused;
  boost::container::small_vector<waiter, 4> woken;
  boost::container::small_vector<synced_counter*, 4> woken_counters;
  for (std::size_t k = 0; k < call.index.size(); ++k) {
    const std::size_t i = call.index[k];
    const auto& op = request.ops[i];
    auto& out = request.results[i];
    auto* c = call.counters[k];
    if (error == nullptr) {
      out = call.results[k];
      if (c != nullptr) {
        counters_.read_answered(*c, op, out, now);
        stats_.reads.inc();
      }
    } else if (call.get) {
      if (outage) out = {};  // nothing read: the increment decides (GCRA: the decision fails, below)
    } else if (call.fallback && outage) {
      if (c != nullptr) {
        counters_.read_failed(*c, op, out, error->maybe_applied);
      } else {
        decide_alone(op, out);
      }
    } else if (c != nullptr) {
      counters_.read_refused(*c);
    }
    if (c == nullptr) continue;
    if (auto it = waiters_.find(c); it != waiters_.end()) {
      for (const auto& w : it->second) {
        woken.push_back(w);
        woken_counters.push_back(c);
      }
      waiters_.erase(it);
    }
  }
  for (const auto& op : call.ops) {
    if (error == nullptr) {
      redis_answered(store_for(op.per_second));
    } else if (outage) {
      redis_failed(store_for(op.per_second), error->message);
    }
  }
  const bool in_store = std::ranges::any_of(call.ops, limiter::decided_in_store);
  if (error != nullptr && (!outage || !call.fallback || in_store)) request.fail(*error);
  // Every woken op is decided before any decision completes: a completion may start another decision here.
  for (std::size_t k = 0; k < woken.size(); ++k) {
    const auto& w = woken[k];
    if (error != nullptr && !outage) {
      w.request->fail(*error);  // the read they waited for was refused: so would theirs be
    } else {
      counters_.decide(*woken_counters[k], w.request->ops[w.index], w.request->results[w.index]);
    }
  }
  delete &call;
  unsent_mirror_.store(counters_.unsent(), std::memory_order_relaxed);  // decided here: read_failed, woken
  for (const auto& w : woken) w.request->finish_one();
  request.finish_one();
  if (draining_) {
    flush();
    check_drained();
  }
}

}  // namespace sluice::ratelimit::backends::redis
