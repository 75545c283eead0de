#include "ratelimit/limiter/limiter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "ratelimit/limiter/algorithms.hpp"

namespace sluice::ratelimit::limiter {

namespace {

std::uint32_t random_jitter(std::uint32_t max_exclusive) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  return static_cast<std::uint32_t>(rng() % max_exclusive);
}

std::int64_t ceil_seconds(std::int64_t micros) {
  return std::max<std::int64_t>(1, (micros + micros_per_second - 1) / micros_per_second);
}

std::uint32_t clamp32(std::uint64_t v) {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(v, std::numeric_limits<std::uint32_t>::max()));
}

}  // namespace

// One limit's verdict, in the terms the stats and the status need.
struct limiter::outcome {
  bool over = false;
  bool via_local_cache = false;
  std::uint64_t after = 0;     // used after this request (as if applied), against `capacity`
  std::uint64_t capacity = 0;  // the limit (a GCRA bucket's burst)
  std::uint32_t remaining = 0;
  std::int64_t reset_seconds = 1;
};

limiter::limiter(settings s, const core::clock& clock, jitter_source jitter)
    : settings_(std::move(s)),
      clock_(clock),
      jitter_(jitter ? std::move(jitter) : jitter_source(random_jitter)),
      local_cache_(settings_.local_cache_size_bytes) {}

std::uint64_t limiter::near_threshold(const applied_limit& limit, std::uint64_t capacity) const {
  // upstream computes this in float32: 15 * 0.8 = 12, 20 * 0.8 = 16.
  const double ratio = limit.near_limit_ratio >= 0 ? limit.near_limit_ratio : settings_.near_limit_ratio;
  float near = static_cast<float>(capacity) * static_cast<float>(ratio);
  return static_cast<std::uint64_t>(std::floor(static_cast<double>(near)));
}

void limiter::prepare(work& w) {
  w.now_us = clock_.now_micros();
  w.now = w.now_us / micros_per_second;
  w.ops.clear();
  bool any_local_hit = false;
  for (auto& item : w.items) {
    if (item.unlimited) continue;
    const key_parts parts{settings_.cache_key_prefix, w.domain, item.entries, item.shared_values};
    for (auto& lw : item.limits) {
      counter_op op = describe_op(w, item, parts, lw);
      // A refund goes to the store even for a key the local cache holds: it may bring the key back under; so
      // does usage, which must count.
      if (item.negative) {
        lw.limit.stats.total_negative_hits->add(item.hits);
      } else {
        lw.limit.stats.total_hits->add(item.hits);
        if (op.kind() == op_kind::count && !op.usage &&
            local_cache_.contains(lw.cache_key, w.now, op.limit())) {
          lw.over_via_local_cache = true;
          any_local_hit = true;
          continue;
        }
      }
      if (settings_.expiration_jitter_max_seconds > 0)
        op.ttl_seconds += jitter_(settings_.expiration_jitter_max_seconds);
      lw.op = w.ops.size();
      w.ops.push_back(op);
    }
  }
  if (w.all_or_nothing) {
    w.mode = assign_roles(w);
  } else {
    w.mode = batch_mode::independent;
    // STOP mode: a key already known to be over limit means no other key of this request is consumed (usage
    // is, having been spent).
    if (settings_.stop_cache_key_increment_when_overlimit && any_local_hit) {
      for (auto& op : w.ops) {
        if (!op.refund && !op.usage) op.increment = 0;
      }
    }
  }
  w.values.assign(w.ops.size(), op_result{});
}

void limiter::describe(work& w) {
  w.now_us = clock_.now_micros();
  w.now = w.now_us / micros_per_second;
  w.ops.clear();
  w.mode = batch_mode::independent;
  for (auto& item : w.items) {
    item.hits = 0;
    item.negative = false;
    if (item.unlimited) continue;
    const key_parts parts{settings_.cache_key_prefix, w.domain, item.entries, item.shared_values};
    for (auto& lw : item.limits) {
      lw.over_via_local_cache = false;
      lw.op = w.ops.size();
      w.ops.push_back(describe_op(w, item, parts, lw));
    }
  }
  w.values.assign(w.ops.size(), op_result{});
}

limiter::limit_state limiter::state_of(const work& w, const descriptor_work& item,
                                       const limit_work& lw) const {
  if (lw.op != SIZE_MAX && w.ops[lw.op].kind() == op_kind::gcra) return gcra_state(w, lw);
  const outcome o = judge(w, item, lw);
  limit_state s;
  s.capacity = o.capacity;
  s.used = o.after;
  s.remaining = o.over ? 0 : std::min<std::uint64_t>(o.remaining, o.capacity);
  s.reset_seconds = o.reset_seconds;
  return s;
}

// A bucket's state in one meaning for every accounting: `used` is the hits not yet refilled, debt included
// (it may pass the burst: usage, or an operator's PUT), and `reset_seconds` is until the bucket is full again
// (used back to 0; 0 for a full one). Decisions answer from judge(), unchanged.
limiter::limit_state limiter::gcra_state(const work& w, const limit_work& lw) {
  const auto& op = std::get<gcra_op>(w.ops[lw.op].algorithm);
  const std::int64_t tat = std::max(static_cast<std::int64_t>(w.values[lw.op].value), w.now_us);
  const std::int64_t debt_us = tat - w.now_us;
  limit_state s;
  s.capacity = lw.limit.gcra_burst();
  s.used = static_cast<std::uint64_t>((debt_us + op.emission_us - 1) / op.emission_us);
  s.remaining = debt_us <= op.tolerance_us ? static_cast<std::uint64_t>(op.tolerance_us - debt_us) /
                                                 static_cast<std::uint64_t>(op.emission_us)
                                           : 0;
  s.remaining = std::min(s.remaining, s.capacity);
  s.reset_seconds = (debt_us + micros_per_second - 1) / micros_per_second;
  return s;
}

std::uint64_t limiter::overwrite_value(const counter_op& op, std::uint64_t used) {
  const auto* gcra = op.as<gcra_op>();
  if (gcra == nullptr || used == 0) return used;
  return static_cast<std::uint64_t>(gcra_advance(op.now_us, used, gcra->emission_us));
}

void limiter::forget(const work& w) {
  for (const auto& item : w.items)
    for (const auto& lw : item.limits)
      if (!lw.cache_key.empty()) local_cache_.erase(lw.cache_key);
}

bool limiter::wants_precheck(const work& w) const {
  return settings_.stop_cache_key_increment_when_overlimit && w.mode == batch_mode::independent &&
         !w.ops.empty() && std::ranges::none_of(w.items, [](const descriptor_work& i) {
           return std::ranges::any_of(i.limits, [](const limit_work& l) { return l.over_via_local_cache; });
         });
}

void limiter::apply_precheck(work& w) {
  // Only fixed-window counters are read ahead; count_only_admitted is the exact form of this mode.
  bool any_exceeds = false;
  small_vector<bool> exceeds(w.ops.size(), false);
  for (const auto& item : w.items) {
    if (item.negative) continue;
    for (const auto& lw : item.limits) {
      if (lw.op == SIZE_MAX || w.ops[lw.op].kind() != op_kind::count) continue;
      exceeds[lw.op] = w.values[lw.op].value + item.hits > lw.limit.requests_per_unit;
      any_exceeds = any_exceeds || exceeds[lw.op];
    }
  }
  if (any_exceeds) {
    for (std::size_t i = 0; i < w.ops.size(); ++i) {
      if (!exceeds[i] && !w.ops[i].refund && !w.ops[i].usage) w.ops[i].increment = 0;
    }
  }
  std::ranges::fill(w.values, op_result{});
}

limiter::outcome limiter::judge(const work& w, const descriptor_work& item, const limit_work& lw) const {
  const auto& limit = lw.limit;
  outcome o;
  o.capacity = limit.requests_per_unit;
  o.reset_seconds = std::max<std::int64_t>(1, lw.window_end - w.now);
  if (lw.over_via_local_cache) {
    o.over = o.via_local_cache = true;
    o.after = o.capacity + item.hits;
    return o;
  }
  const auto& op = w.ops[lw.op];
  const auto& result = w.values[lw.op];
  if (op.kind() == op_kind::concurrency) {
    // Slots held: the status's reset is when the oldest lease held ends, should no release come first.
    o.after = result.value;
    o.over = !item.negative && !admits(op, result);
    if (!o.over) o.remaining = clamp32(o.capacity - std::min(o.capacity, o.after));
    o.reset_seconds =
        result.oldest_end_us > 0 ? ceil_seconds(result.oldest_end_us - w.now_us) : limit.lease_seconds;
    return o;
  }
  if (const auto* gcra = op.as<gcra_op>()) {
    o.capacity = limit.gcra_burst();
    const auto tat = static_cast<std::int64_t>(result.value);
    o.over = !admits(op, result);
    if (o.over) {
      o.after = o.capacity + item.hits;
      // Until it would admit (a usage check: one hit).
      o.reset_seconds =
          ceil_seconds(gcra_advance(tat, judged_hits(op), gcra->emission_us) - gcra->tolerance_us - w.now_us);
    } else {
      const std::uint64_t room = static_cast<std::uint64_t>(w.now_us + gcra->tolerance_us - tat) /
                                 static_cast<std::uint64_t>(gcra->emission_us);
      o.remaining = clamp32(room);
      o.after = o.capacity - std::min(o.capacity, room);
      o.reset_seconds = ceil_seconds(tat - w.now_us);  // until the bucket is full again
    }
    return o;
  }
  o.after = result.value;
  if (const auto* sliding = op.as<sliding_window_op>())
    o.after += sliding_weighted_previous(result.previous, *sliding, op.now_us);
  o.over = !item.negative && o.after + judged_hits(op) > o.capacity;
  if (!o.over) o.remaining = clamp32(o.capacity - std::min(o.capacity, o.after));
  return o;
}

void limiter::count_stats(const descriptor_work& item, const limit_work& lw, const outcome& o) {
  const auto& stats = lw.limit.stats;
  const std::uint64_t h = item.hits;
  const std::uint64_t L = o.capacity;
  if (o.via_local_cache) {
    stats.over_limit->add(h);
    stats.over_limit_with_local_cache->add(h);
    if (lw.limit.shadow_mode) stats.shadow_mode->add(h);
    return;
  }
  const std::uint64_t before = o.after - h;  // may wrap in STOP mode; only affects stats, as upstream
  const std::uint64_t near = near_threshold(lw.limit, L);
  std::uint64_t shadow_hits = h;
  if (o.over) {
    if (before >= L) {
      stats.over_limit->add(h);
    } else {
      stats.over_limit->add(o.after - L);
      stats.near_limit->add(L - std::max(near, before));
      shadow_hits = o.after - L;
    }
    if (lw.limit.shadow_mode) stats.shadow_mode->add(shadow_hits);
  } else {
    stats.within_limit->add(h);
    if (o.after > near) stats.near_limit->add(before >= near ? h : o.after - near);
  }
}

// A concurrency limit's slots taken, given back and freed by their leases (rule_stats: acquired, released,
// expired_leases).
void limiter::count_leases(const work& w, const descriptor_work& item, const limit_work& lw,
                           bool applied_nothing) {
  const auto& stats = lw.limit.stats;
  if (stats.acquired == nullptr) return;  // (statistics of a request's own key: detailed_metric)
  const auto& op = w.ops[lw.op];
  const auto& r = w.values[lw.op];
  stats.expired_leases->add(r.expired);
  if (applied_nothing) return;
  if (item.negative) {
    const std::uint64_t freed = r.before - std::min(r.before, r.value);
    stats.released->add(freed);
    // A holder that held nothing: behind Envoy, mostly a refused request's stream-done release.
    if (op.per_holder() && freed == 0 && stats.unheld_releases != nullptr) stats.unheld_releases->inc();
  } else if (admits(op, r)) {
    // A holder's repeated acquisition counts once: only the slots it adds.
    stats.acquired->add(op.per_holder() ? r.value - std::min(r.value, r.before) : item.hits);
  }
}

void limiter::finish(work& w, std::span<response_status*> statuses) {
  using code = envoy::service::ratelimit::v3::RateLimitResponse;
  // An all-or-nothing batch whose verdict refused applied nothing: the limits that were within still have the
  // hits this request would have taken.
  bool applied_nothing = w.mode == batch_mode::evaluate_only;
  if (w.mode == batch_mode::all_or_nothing) {
    batch_verdict verdict;
    for (std::size_t i = 0; i < w.ops.size(); ++i) verdict.add(w.ops[i], admits(w.ops[i], w.values[i]));
    applied_nothing = !verdict.applies();
  }
  for (std::size_t i = 0; i < w.items.size(); ++i) {
    auto& item = w.items[i];
    auto& status = *statuses[i];
    if (item.unlimited) {
      status.set_code(code::OK);
      status.set_limit_remaining(std::numeric_limits<std::uint32_t>::max());
      continue;
    }
    if (item.limits.empty()) {
      status.set_code(code::OK);
      continue;
    }
    // Every limit is judged and counted; the status shows the one closest to its limit: an over one (the
    // longest to wait), else the least remaining (then the longest to reset).
    std::size_t chosen = 0;
    outcome best;
    bool enforced_over = false;
    for (std::size_t k = 0; k < item.limits.size(); ++k) {
      const auto& lw = item.limits[k];
      const outcome o = judge(w, item, lw);
      if (lw.op != SIZE_MAX && w.ops[lw.op].kind() == op_kind::concurrency)
        count_leases(w, item, lw, applied_nothing);
      if (item.negative) {
        if (!o.over && o.after < o.capacity && lw.op != SIZE_MAX) local_cache_.erase(lw.cache_key);
      } else {
        count_stats(item, lw, o);
        // A batch that applied nothing left the counter at `after - hits`.
        const bool counter_full = applied_nothing ? o.after - item.hits >= o.capacity : o.after > o.capacity;
        if (o.over && !o.via_local_cache && w.ops[lw.op].kind() == op_kind::count && !lw.limit.usage &&
            counter_full) {
          local_cache_.insert(lw.cache_key,
                              lw.limit.zone != nullptr ? lw.window_end : w.now + lw.limit.window_seconds(),
                              w.now, lw.limit.requests_per_unit);
        }
        enforced_over = enforced_over || (o.over && !lw.limit.shadow_mode);
      }
      const bool better =
          k == 0 || (o.over && !best.over) ||
          (o.over == best.over && (o.remaining < best.remaining ||
                                   (o.remaining == best.remaining && o.reset_seconds > best.reset_seconds)));
      if (better) {
        chosen = k;
        best = o;
      }
    }
    const auto& limit = item.limits[chosen].limit;
    item.shown = chosen;
    item.over = best.over && !item.negative;
    auto* current = status.mutable_current_limit();
    current->set_requests_per_unit(limit.requests_per_unit);
    current->set_unit(static_cast<code::RateLimit::Unit>(limit.unit));
    if (limit.name != nullptr && !limit.name->empty()) current->set_name(*limit.name);
    status.mutable_duration_until_reset()->set_seconds(best.reset_seconds);
    if (!best.over) {
      const std::uint64_t returned = applied_nothing && !item.negative && !limit.usage ? item.hits : 0;
      status.set_limit_remaining(clamp32(std::min<std::uint64_t>(best.capacity, best.remaining + returned)));
    }
    // Hits given back never make a descriptor over its limit.
    status.set_code(enforced_over ? code::OVER_LIMIT : code::OK);
  }
}

}  // namespace sluice::ratelimit::limiter
