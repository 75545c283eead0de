#include "ratelimit/backends/redis/regional_backend.hpp"

#include <algorithm>

#include <boost/container/small_vector.hpp>

#include "ratelimit/limiter/sliding_window.hpp"

namespace sluice::ratelimit::backends::redis {

namespace regional {

constexpr std::int64_t second_us = 1'000'000;
constexpr std::uint32_t no_slot = UINT32_MAX;

struct report {
  bool counter = false;  // a fixed or sliding window's: its count is reported
  std::uint32_t slot = no_slot;
  std::uint64_t limit = 0;
};

// Every algorithm's limit but GCRA's (which regions refuse at load).
void lower_limit(limiter::counter_op& op, std::uint64_t by) {
  std::visit(
      [by](auto& a) {
        if constexpr (requires { a.limit; }) a.limit -= std::min(a.limit, by);
      },
      op.algorithm);
}

// How the reader reads op's key, and until when it needs to (a window's counter until its window ends; a
// sliding window's current counter one window longer, as the next window's previous one).
tracked_key tracked(const limiter::counter_op& op) {
  tracked_key t;
  t.limit = op.limit();
  t.rule = op.rule;
  if (const auto* f = op.as<limiter::fixed_window_op>()) {
    t.window_end_us = f->window_end * second_us;
    t.until_us = t.window_end_us + second_us;
  } else if (const auto* s = op.as<limiter::sliding_window_op>()) {
    t.window_end_us = s->window_end * second_us;
    t.until_us = t.window_end_us + s->window_us + second_us;
  } else if (const auto* l = op.as<limiter::lease_op>()) {
    t.kind = remote_kind::leases;
    t.timing = l->timing;
    t.lease_us = (l->timing.slices + 2) * l->timing.slice_us;
    t.until_us = op.now_us + t.lease_us;
  } else if (const auto* h = op.as<limiter::holder_op>()) {
    t.kind = remote_kind::holders;
    t.lease_us = h->lease_us;
    t.until_us = op.now_us + t.lease_us;
  }
  return t;
}

}  // namespace regional

// One operation in flight whose results get remote totals added: the ops as sent (limits lowered; the views
// in them point into the limiter's ops, valid until it completes) and what to add to each result.
struct regional_backend::call final : limiter::completion {
  regional_backend* owner = nullptr;
  boost::container::small_vector<limiter::counter_op, 8> ops;
  boost::container::small_vector<std::uint64_t, 8> totals;
  // REDIS_REMOTE_COLD_INTERVAL: per op (empty: none) whether its count goes to report_local, its key's slot
  // and its limit.
  boost::container::small_vector<regional::report, 8> reports;
  std::span<limiter::op_result> results;
  limiter::completion* outer = nullptr;
  bool inspecting = false;  // inspect: `before` is the store's own value, the remote totals in it

  void complete(const limiter::backend_error* error) noexcept override {
    if (error == nullptr) {
      for (std::size_t i = 0; i < ops.size(); ++i) {
        if (!reports.empty() && reports[i].counter)
          owner->report_local(ops[i].key, reports[i].slot, results[i].value, reports[i].limit);
        results[i].value += totals[i];
        // Slots held before the op too: released = before - after stays this region's. Inspected: what a
        // batching store has not sent yet (value - before) stays this worker's own.
        if (inspecting || ops[i].kind() == limiter::op_kind::concurrency) results[i].before += totals[i];
      }
    }
    auto* done = outer;
    owner->release(this);
    done->complete(error);
  }
};

regional_backend::regional_backend(limiter::backend& inner, bool per_second_apart, bool cold)
    : inner_(inner), per_second_apart_(per_second_apart), cold_(cold) {}

regional_backend::~regional_backend() = default;

regional_backend::call* regional_backend::acquire() {
  if (free_.empty()) {
    auto c = std::make_unique<call>();
    c->owner = this;
    return c.release();
  }
  auto* c = free_.back().release();
  free_.pop_back();
  return c;
}

void regional_backend::release(call* c) {
  c->ops.clear();
  c->totals.clear();
  c->reports.clear();
  c->inspecting = false;
  free_.emplace_back(c);
}

void regional_backend::set_view(remote_view_ptr view) {
  for (const auto& [key, slot] : view->added) {
    // (A key is added again only after it was dropped; were it not, the entry must point at the new string.)
    if (auto [it, fresh] = slots_.try_emplace(std::string_view(*key), slot); !fresh) {
      slots_.erase(it);
      slots_.emplace(std::string_view(*key), slot);
    }
  }
  for (const auto& key : view->removed) slots_.erase(std::string_view(*key));
  view_ = std::move(view);
}

std::uint64_t regional_backend::lookup(std::string_view key, const limiter::counter_op& op, bool previous,
                                       std::uint32_t* slot) {
  if (view_) {
    if (auto it = slots_.find(key); it != slots_.end() && it->second < view_->totals.size()) {
      auto& used = view_->used[it->second];
      if (op.kind() == limiter::op_kind::concurrency && !used.load(std::memory_order_relaxed))
        used.store(true, std::memory_order_relaxed);
      if (slot != nullptr) *slot = it->second;
      return view_->totals[it->second];
    }
  }
  // Not read yet: listed for the reader (how to read it is worked out here only, off the common path).
  if (new_keys_.find(key) == new_keys_.end()) {
    auto how = regional::tracked(op);
    if (previous) {
      how.until_us = how.window_end_us + regional::second_us;
      how.previous = true;
    }
    new_keys_.emplace(std::string(key), std::move(how));
  }
  if (view_ && view_->share_regions > 0 && !previous) return op.limit() - op.limit() / view_->share_regions;
  return 0;
}

void regional_backend::report_local(std::string_view key, std::uint32_t slot, std::uint64_t count,
                                    std::uint64_t limit) {
  if (slot == regional::no_slot) {
    if (auto it = new_keys_.find(key); it != new_keys_.end())
      it->second.local = std::max(it->second.local, count);
    return;
  }
  if (!view_ || !view_->local_seen || slot >= view_->totals.size()) return;
  auto& seen = view_->local_seen[slot];
  if (count >= seen.load(std::memory_order_relaxed) + remote_view::local_step(limit))
    seen.store(count, std::memory_order_relaxed);
}

std::uint64_t regional_backend::remote_total(const limiter::counter_op& op, std::uint32_t* slot) {
  if (op.kind() == limiter::op_kind::gcra || (op.per_second && per_second_apart_)) return 0;
  std::uint64_t total = lookup(op.key, op, false, slot);
  if (const auto* s = op.as<limiter::sliding_window_op>())
    total += limiter::sliding_weighted_previous(lookup(s->previous_key, op, true), *s, op.now_us);
  return total;
}

template <typename Run>
void regional_backend::with_totals(std::span<const limiter::counter_op> ops,
                                   std::span<limiter::op_result> results, limiter::completion& done, Run run,
                                   bool inspecting) {
  boost::container::small_vector<std::uint64_t, 8> totals(ops.size());
  // REDIS_REMOTE_COLD_INTERVAL: the counters' own counts are reported as their results come (a key the view
  // lacks, to the reader with the key).
  const bool report = !inspecting && cold_;
  boost::container::small_vector<regional::report, 8> reports;
  if (report) reports.resize(ops.size());
  bool any = false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::uint32_t slot = regional::no_slot;
    totals[i] = remote_total(ops[i], report ? &slot : nullptr);
    any = any || totals[i] != 0;
    const auto kind = ops[i].kind();
    if (report && (kind == limiter::op_kind::count || kind == limiter::op_kind::sliding) &&
        !(ops[i].per_second && per_second_apart_)) {
      reports[i] = {true, slot, ops[i].limit()};
      any = true;
    }
  }
  if (!any) return run(ops, done);  // nothing remote: the ops as they are
  auto* c = acquire();
  c->reports = std::move(reports);
  c->ops.assign(ops.begin(), ops.end());
  for (std::size_t i = 0; i < ops.size(); ++i) regional::lower_limit(c->ops[i], totals[i]);
  c->totals = std::move(totals);
  c->results = results;
  c->outer = &done;
  c->inspecting = inspecting;
  run(std::span<const limiter::counter_op>(c->ops.data(), c->ops.size()), *c);
}

void regional_backend::increment(std::span<const limiter::counter_op> ops,
                                 std::span<limiter::op_result> results, limiter::completion& done,
                                 limiter::batch_mode mode) {
  with_totals(ops, results, done, [&](std::span<const limiter::counter_op> sent, limiter::completion& then) {
    inner_.increment(sent, results, then, mode);
  });
}

void regional_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                           limiter::completion& done) {
  with_totals(ops, results, done, [&](std::span<const limiter::counter_op> sent, limiter::completion& then) {
    inner_.get(sent, results, then);
  });
}

void regional_backend::inspect(std::span<const limiter::counter_op> ops,
                               std::span<limiter::op_result> results, limiter::completion& done) {
  with_totals(
      ops, results, done,
      [&](std::span<const limiter::counter_op> sent, limiter::completion& then) {
        inner_.inspect(sent, results, then);
      },
      true);
}

}  // namespace sluice::ratelimit::backends::redis
