#include "ratelimit/backends/redis/synced_counters.hpp"

#include <algorithm>

#include "ratelimit/limiter/algorithms.hpp"

namespace sluice::ratelimit::backends::redis {

synced_counters::routed synced_counters::find(const limiter::counter_op& op, bool redis_failing) {
  auto it = table_.find(op.key);
  if (it == table_.end()) {
    if (table_.size() >= max_keys_) return {};
    it = table_.emplace(std::string(op.key), synced_counter{}).first;
    auto& c = it->second;
    c.key = it->first;
    c.window_end = op.window_end;
    c.ttl_seconds = op.ttl_seconds;
    c.per_second = op.per_second;
    c.reading = true;
    return {&c, route::read};
  }
  auto& c = it->second;
  c.ttl_seconds = op.ttl_seconds;
  if (c.reading) return {&c, route::wait};
  if (decidable(c, op, redis_failing)) return {&c, route::local};
  c.reading = true;
  return {&c, route::read};
}

// A stale view is read again when nothing of it is unsent or in Redis; a counter over its limit stays so
// until its window ends, whatever others count.
bool synced_counters::decidable(const synced_counter& c, const limiter::counter_op& op,
                                bool redis_failing) const {
  const bool fresh = op.now_us - c.read_at_us <= fresh_us_;
  return fresh || c.over || c.flushing || c.pending != 0 || redis_failing;
}

synced_counter* synced_counters::usable(const limiter::counter_op& op, bool redis_failing) {
  auto it = table_.find(op.key);
  if (it == table_.end() || it->second.reading || !decidable(it->second, op, redis_failing)) return nullptr;
  return &it->second;
}

void synced_counters::count(synced_counter& c, std::int64_t hits) {
  if (hits == 0) return;
  c.pending += hits;
  unsent_ += hits;
  mark_dirty(c);
}

void synced_counters::mark_dirty(synced_counter& c) {
  if (c.dirty) return;
  c.dirty = true;
  dirty_.push_back(&c);
}

void synced_counters::decide(synced_counter& c, const limiter::counter_op& op, limiter::op_result& out) {
  const std::uint64_t view = c.view();
  out.before = view;
  out.previous = c.previous;
  if (op.refund) {
    const std::uint64_t give = std::min(view, op.increment);
    out.value = view - give;
    count(c, -static_cast<std::int64_t>(give));
    if (out.value <= op.limit) c.over = false;
    return;
  }
  if (op.kind == limiter::op_kind::sliding) {
    // A sliding window counts only what it admits.
    if (limiter::evaluate(op, view, c.previous, out)) count(c, static_cast<std::int64_t>(op.increment));
    return;
  }
  out.value = view + op.increment;
  if (c.over) return;  // the local over-limit cache: not counted
  count(c, static_cast<std::int64_t>(op.increment));
  if (out.value > op.limit) c.over = true;
}

void synced_counters::read_answered(synced_counter& c, const limiter::counter_op& op,
                                    const limiter::op_result& r, std::int64_t now_us) {
  c.reading = false;
  c.read_at_us = now_us;
  // Redis applied the op: a sliding window's hits it did not admit are taken back there (redis_backend).
  c.base = r.value;
  if (op.kind == limiter::op_kind::sliding) {
    c.previous = r.previous;
    if (!op.refund && !limiter::admits(op, r)) c.base -= std::min(c.base, op.increment);
  }
  // Nothing of it is unsent or in flight: both wait while it is read.
  c.over = !op.refund && op.kind == limiter::op_kind::count && c.view() > op.limit;
}

void synced_counters::read_failed(synced_counter& c, const limiter::counter_op& op, limiter::op_result& out) {
  c.reading = false;
  decide(c, op, out);
}

void synced_counters::read_refused(synced_counter& c) {
  c.reading = false;
  c.read_at_us = 0;
}

void synced_counters::add_applied(std::span<const limiter::counter_op> ops,
                                  std::span<const limiter::op_result> results) {
  limiter::batch_verdict verdict;
  for (std::size_t i = 0; i < ops.size(); ++i) verdict.add(ops[i], limiter::admits(ops[i], results[i]));
  if (!verdict.applies()) return;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.kind == limiter::op_kind::gcra || !limiter::applies(op, limiter::admits(op, results[i]))) continue;
    auto it = table_.find(op.key);
    if (it == table_.end() || it->second.reading) continue;
    auto& c = it->second;
    // Should a flush's reply already carry them, the view is high until the next one (stricter, never
    // looser).
    c.base = op.refund ? c.base - std::min(c.base, op.increment) : c.base + op.increment;
  }
}

void synced_counters::take_flush(std::vector<flush_item>& out) {
  std::size_t kept = 0;
  for (auto* counter : dirty_) {
    auto& c = *counter;
    if (c.reading || c.flushing) {
      dirty_[kept++] = counter;  // in Redis already: next time
      continue;
    }
    c.dirty = false;
    if (c.pending == 0) continue;
    out.push_back({c.key, &c, c.pending});
    c.in_flight = c.pending;
    c.pending = 0;
    c.flushing = true;
  }
  dirty_.resize(kept);
}

void synced_counters::flush_answered(synced_counter& c, std::uint64_t value, std::int64_t now_us) {
  unsent_ -= c.in_flight;
  c.base = value;
  c.in_flight = 0;
  c.flushing = false;
  c.read_at_us = now_us;
}

void synced_counters::flush_failed(synced_counter& c) {
  c.pending += c.in_flight;
  c.in_flight = 0;
  c.flushing = false;
  if (c.pending != 0) mark_dirty(c);
}

void synced_counters::flush_refused(synced_counter& c) {
  unsent_ -= c.in_flight;
  c.in_flight = 0;
  c.flushing = false;
  c.read_at_us = 0;
  c.over = false;
}

std::size_t synced_counters::sweep(std::int64_t now_seconds) {
  return std::erase_if(table_, [now_seconds](const auto& entry) {
    const auto& c = entry.second;
    return c.window_end < now_seconds && !c.dirty && !c.flushing && !c.reading && c.pending == 0;
  });
}

}  // namespace sluice::ratelimit::backends::redis
