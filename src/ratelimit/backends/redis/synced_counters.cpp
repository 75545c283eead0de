#include "ratelimit/backends/redis/synced_counters.hpp"

#include <algorithm>
#include <cstdlib>

#include "ratelimit/limiter/algorithms.hpp"

namespace sluice::ratelimit::backends::redis {

namespace {

// When a counter's window ends (Unix seconds): batched counting keeps fixed and sliding windows' counters
// only.
std::int64_t window_end_of(const limiter::counter_op& op) {
  if (const auto* sliding = op.as<limiter::sliding_window_op>()) return sliding->window_end;
  return std::get<limiter::fixed_window_op>(op.algorithm).window_end;
}

}  // namespace

synced_counters::routed synced_counters::find(const limiter::counter_op& op, std::int64_t now_us,
                                              bool redis_failing) {
  auto it = table_.find(op.key);
  if (it == table_.end()) {
    if (table_.size() >= max_keys_) return {};
    it = table_.emplace(std::string(op.key), synced_counter{}).first;
    auto& c = it->second;
    c.key = it->first;
    c.window_end = window_end_of(op);
    c.ttl_seconds = op.ttl_seconds;
    c.per_second = op.per_second;
    c.reading = true;
    by_end_[c.window_end].push_back(&c);
    return {&c, route::read};
  }
  auto& c = it->second;
  c.ttl_seconds = op.ttl_seconds;
  if (c.reading) return {&c, route::wait};
  if (decidable(c, op, now_us, redis_failing)) return {&c, route::local};
  c.reading = true;
  return {&c, route::read};
}

// A stale view is read again when nothing of it is unsent or in Redis; a counter over its limit stays so
// until its window ends (or a flush's reply brings it under), for ops whose limit is no higher than the one
// it went over (a raised limit reads the counter again). Not for a refund: the view of a counter over its
// limit is not read again and can be old, and hits given back there would bring it under from that old view,
// missing what the others counted since (so the refund is read, as a stale counter's op).
bool synced_counters::decidable(const synced_counter& c, const limiter::counter_op& op, std::int64_t now_us,
                                bool redis_failing) const {
  const bool fresh = now_us - c.read_at_us <= fresh_us_;
  const bool known_over = c.over && !op.refund && op.limit() <= c.over_limit;
  // (Not read while it holds a refund beyond its view either: Redis would count the read's hits as
  // others', and give them back.)
  return fresh || known_over || c.flushing || c.pending != 0 || c.beyond != 0 || redis_failing;
}

synced_counter* synced_counters::usable(const limiter::counter_op& op, std::int64_t now_us,
                                        bool redis_failing) {
  auto it = table_.find(op.key);
  if (it == table_.end() || it->second.reading || !decidable(it->second, op, now_us, redis_failing))
    return nullptr;
  return &it->second;
}

// What is unsent is counted in absolute hits per counter, so that hits given back on one key do not hide
// hits counted on another.
void synced_counters::set_unsent(synced_counter& c, std::int64_t pending, std::int64_t in_flight,
                                 std::uint64_t beyond, std::uint64_t beyond_in_flight) {
  auto held = [](std::int64_t p, std::int64_t f, std::uint64_t b, std::uint64_t bf) {
    return std::abs(p) + std::abs(f) + static_cast<std::int64_t>(b + bf);
  };
  unsent_ += held(pending, in_flight, beyond, beyond_in_flight) -
             held(c.pending, c.in_flight, c.beyond, c.beyond_in_flight);
  c.pending = pending;
  c.in_flight = in_flight;
  c.beyond = beyond;
  c.beyond_in_flight = beyond_in_flight;
}

void synced_counters::count(synced_counter& c, std::int64_t hits) {
  if (hits == 0) return;
  set_unsent(c, c.pending + hits, c.in_flight, c.beyond, c.beyond_in_flight);
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
    // What the view holds is given back here. The rest may be hits of other workers that this view has not
    // seen yet: Redis gives it back from those, never from what this worker's own unsent hits will bring.
    const std::uint64_t give = std::min(view, op.increment);
    out.value = view - give;
    count(c, -static_cast<std::int64_t>(give));
    if (give < op.increment) {
      // What Redis holds (or will, once the flush out now is in) of what this view counts.
      const auto seen = static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, static_cast<std::int64_t>(c.base) + c.in_flight));
      c.beyond_seen = c.beyond == 0 ? seen : std::max(c.beyond_seen, seen);
      set_unsent(c, c.pending, c.in_flight, c.beyond + (op.increment - give), c.beyond_in_flight);
      mark_dirty(c);
    }
    if (out.value <= op.limit()) c.over = false;
    return;
  }
  if (op.kind() == limiter::op_kind::sliding) {
    // A sliding window counts only what it admits (usage: every hit).
    const bool admitted = limiter::evaluate(op, view, c.previous, out);
    if (limiter::applies(op, admitted)) count(c, static_cast<std::int64_t>(op.increment));
    return;
  }
  out.value = view + op.increment;
  // The local over-limit cache: not counted, unless it is usage. (Should the view have come back under, by
  // others' negative hits in a flush's reply, the counter counts again.)
  if (c.over && out.value > op.limit() && !op.usage) return;
  count(c, static_cast<std::int64_t>(op.increment));
  c.over = out.value > op.limit();
  c.over_limit = op.limit();
}

void synced_counters::read_answered(synced_counter& c, const limiter::counter_op& op,
                                    const limiter::op_result& r, std::int64_t now_us) {
  c.reading = false;
  c.read_at_us = now_us;
  // Redis applied the op: a sliding window's hits it did not admit are taken back there (redis_backend).
  c.base = r.value;
  if (op.kind() == limiter::op_kind::sliding) {
    c.previous = r.previous;
    if (!limiter::applies(op, limiter::admits(op, r))) c.base -= std::min(c.base, op.increment);
  }
  // Nothing of it is unsent or in flight: both wait while it is read. A refund read (a counter over its limit
  // whose view was old) leaves it over unless it is under now, as decide() does.
  if (op.refund) {
    if (c.view() <= op.limit()) c.over = false;
    return;
  }
  c.over = op.kind() == limiter::op_kind::count && c.view() > op.limit();
  c.over_limit = op.limit();
}

void synced_counters::read_failed(synced_counter& c, const limiter::counter_op& op, limiter::op_result& out,
                                  bool maybe_applied) {
  c.reading = false;
  if (op.refund && maybe_applied) {
    out.before = c.view();
    out.previous = c.previous;
    out.value = out.before - std::min(out.before, op.increment);
    return;
  }
  decide(c, op, out);
}

void synced_counters::read_refused(synced_counter& c) {
  c.reading = false;
  c.read_at_us = 0;
}

void synced_counters::add_applied(std::span<const limiter::counter_op> ops,
                                  std::span<const limiter::op_result> results, bool evaluated_only) {
  limiter::batch_verdict verdict;
  for (std::size_t i = 0; i < ops.size(); ++i) verdict.add(ops[i], limiter::admits(ops[i], results[i]));
  // Usage is applied whatever the verdict (and in an evaluate-only batch too).
  const bool applied = evaluated_only ? false : verdict.applies();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (limiter::decided_in_store(op) || !(applied || op.usage) ||
        !limiter::applies(op, limiter::admits(op, results[i])))
      continue;
    auto it = table_.find(op.key);
    if (it == table_.end() || it->second.reading) continue;
    auto& c = it->second;
    // Should a flush's reply already carry them, the view is high until the next one (stricter, never
    // looser).
    const auto moved = [&](std::uint64_t v) {
      return op.refund ? v - std::min(v, op.increment) : v + op.increment;
    };
    c.base = moved(c.base);
    // This worker's own, not others' to give back.
    if (c.beyond != 0) c.beyond_seen = moved(c.beyond_seen);
    if (c.beyond_in_flight != 0) c.beyond_in_flight_seen = moved(c.beyond_in_flight_seen);
  }
}

std::int64_t synced_counters::pending_of(std::string_view key) const {
  auto it = table_.find(key);
  return it != table_.end() ? it->second.pending : 0;
}

void synced_counters::overwritten(std::string_view key, std::uint64_t value) {
  auto it = table_.find(key);
  if (it == table_.end()) return;
  auto& c = it->second;
  set_unsent(c, 0, c.in_flight, 0, c.beyond_in_flight);
  c.base = value;
  c.previous = 0;  // (overwrite deletes a sliding window's previous counter)
  c.over = false;
  c.read_at_us = 0;
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
    if (c.pending == 0 && c.beyond == 0) continue;
    out.push_back({c.key, &c, c.pending, c.beyond, c.beyond_seen});
    c.beyond_in_flight_seen = c.beyond_seen;
    set_unsent(c, 0, c.pending, 0, c.beyond);
    c.flushing = true;
  }
  dirty_.resize(kept);
}

void synced_counters::flush_answered(synced_counter& c, std::uint64_t value, std::int64_t now_us) {
  set_unsent(c, c.pending, 0, c.beyond, 0);
  c.base = value;
  c.flushing = false;
  c.read_at_us = now_us;
  // Others' negative hits in the reply brought it back under: no longer known to be over, so its view is read
  // again once it is old (a counter known over never is).
  if (c.over && c.view() <= c.over_limit) c.over = false;
}

// A refund beyond the view given back while the flush was out counted its hits as in Redis: they are unsent
// again, and will reach Redis after the refund's script.
void synced_counters::unsend_seen(synced_counter& c) {
  if (c.beyond == 0) return;
  const std::int64_t seen = static_cast<std::int64_t>(c.beyond_seen) - c.in_flight;
  c.beyond_seen = seen > 0 ? static_cast<std::uint64_t>(seen) : 0;
}

void synced_counters::flush_failed(synced_counter& c, bool maybe_run) {
  const bool refund_run = maybe_run && c.in_flight < 0;
  // A refund beyond the view while the flush was out counted on the flush's hits as in Redis: hits sent
  // again are not, until after its script. (A refund not sent again: as Redis may hold it, or the hits it
  // did not take, which the beyond refund may take instead: never more than both asked.)
  if (!refund_run) unsend_seen(c);
  const std::uint64_t beyond_again = maybe_run ? 0 : c.beyond_in_flight;
  if (beyond_again != 0)
    c.beyond_seen =
        c.beyond == 0 ? c.beyond_in_flight_seen : std::max(c.beyond_seen, c.beyond_in_flight_seen);
  set_unsent(c, c.pending + (refund_run ? 0 : c.in_flight), 0, c.beyond + beyond_again, 0);
  c.flushing = false;
  if (c.pending != 0 || c.beyond != 0) mark_dirty(c);
}

void synced_counters::flush_refused(synced_counter& c) {
  unsend_seen(c);  // (its hits never arrive)
  set_unsent(c, c.pending, 0, c.beyond, 0);
  c.flushing = false;
  c.read_at_us = 0;
  c.over = false;
}

// Only the counters of windows that ended are looked at: a sweep costs what it forgets, not the table.
std::size_t synced_counters::sweep(std::int64_t now_seconds) {
  std::size_t forgotten = 0;
  std::vector<synced_counter*> busy;
  while (!by_end_.empty() && by_end_.begin()->first < now_seconds) {
    for (auto* c : by_end_.begin()->second) {
      if (c->dirty || c->flushing || c->reading || c->pending != 0 || c->beyond != 0) {
        busy.push_back(c);  // looked at again next time
        continue;
      }
      table_.erase(table_.find(c->key));
      ++forgotten;
    }
    by_end_.erase(by_end_.begin());
  }
  if (!busy.empty()) {
    auto& later = by_end_[now_seconds];
    later.insert(later.end(), busy.begin(), busy.end());
  }
  return forgotten;
}

}  // namespace sluice::ratelimit::backends::redis
