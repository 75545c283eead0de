// The memory store's side of operator control (the counters API): reading a descriptor's keys without
// counting, and setting or deleting them.

#include <algorithm>

#include "ratelimit/backends/memory/memory_backend.hpp"

namespace sluice::ratelimit::backends::memory {

void memory_backend::inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                             limiter::completion& done) {
  const std::int64_t now = clock_.now_seconds();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    auto& out = results[i];
    out = {};
    if (op.kind() == limiter::op_kind::concurrency) {
      auto& s = lease_shard_for(op.key);
      std::lock_guard lock(s.mutex);
      auto it = s.leases.find(op.key);
      limiter::lease_outcome r;
      if (const auto* h = op.as<limiter::holder_op>()) {
        const std::string_view* holder = h->holder ? &*h->holder : nullptr;
        r = limiter::inspect_holders(it != s.leases.end() ? it->second.holders : limiter::lease_holders{},
                                     op.now_us, holder);
      } else {
        const auto& leases = std::get<limiter::lease_op>(op.algorithm);
        limiter::lease_slices copy;
        if (it != s.leases.end()) copy = it->second.slices;
        r = limiter::apply_lease_op(copy, leases.timing, op.now_us, 0, false, leases.limit);
      }
      out.value = out.before = r.before;
      out.oldest_end_us = r.oldest_end_us;
      out.holders = r.holders;
      out.holder_slots = r.holder_slots;
      continue;
    }
    if (const auto* sliding = op.as<limiter::sliding_window_op>()) {
      auto& p = shard_for(sliding->previous_key);
      std::lock_guard lock(p.mutex);
      out.previous = read_locked(p, sliding->previous_key, now);
    }
    auto& s = shard_for(op.key);
    std::lock_guard lock(s.mutex);
    out.before = read_locked(s, op.key, now);
    out.value = op.kind() == limiter::op_kind::gcra
                    ? std::max(out.before, static_cast<std::uint64_t>(std::max<std::int64_t>(0, op.now_us)))
                    : out.before;
  }
  done.complete(nullptr);
}

void memory_backend::overwrite_counter(std::string_view key, std::uint64_t value, std::int64_t expires_at,
                                       std::int64_t now) {
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.counters.find(key);
  if (value == 0) {
    if (it == s.counters.end()) return;
    s.counters.erase(it);
    live_.fetch_sub(1, std::memory_order_relaxed);
  } else if (it != s.counters.end()) {
    it->second = {value, expires_at};
  } else {
    // An operator's counter is stored even past MEMORY_MAX_COUNTERS (after reclaiming this shard): the bound
    // is for what clients create.
    if (live_.load(std::memory_order_relaxed) >= max_counters_) reclaim_locked(s, now);
    s.counters.emplace(detail::compact_key(key), detail::counter_entry{value, expires_at});
    live_.fetch_add(1, std::memory_order_relaxed);
  }
  s.used.store(static_cast<std::uint32_t>(s.counters.size()), std::memory_order_relaxed);
}

void memory_backend::overwrite_leases(const limiter::counter_op& op, std::uint64_t held) {
  auto& s = lease_shard_for(op.key);
  std::lock_guard lock(s.mutex);
  auto it = s.leases.find(op.key);
  const auto* per_holder = op.as<limiter::holder_op>();
  if (per_holder != nullptr && per_holder->holder) {
    const std::string_view holder = *per_holder->holder;
    // One holder's lease: freed, or holding `held` slots for a lease from now.
    if (it == s.leases.end()) {
      if (held == 0) return;
      it = s.leases.emplace(detail::compact_key(op.key), detail::lease_entry{}).first;
      live_.fetch_add(1, std::memory_order_relaxed);
    }
    auto& holders = it->second.holders;
    limiter::drop_ended(holders, op.now_us);
    holders.erase(std::remove_if(holders.begin(), holders.end(),
                                 [&](const limiter::holder_lease& h) { return h.holder == holder; }),
                  holders.end());
    if (held > 0) holders.push_back({std::string(holder), held, op.now_us + per_holder->lease_us});
    if (holders.empty()) {
      s.leases.erase(it);
      live_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    it->second.expires_at = detail::lease_entry_expiry(it->second, op);
    return;
  }
  if (it != s.leases.end()) {
    s.leases.erase(it);
    live_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (held == 0 || per_holder != nullptr) return;  // (the whole set of holders is only ever freed)
  const auto& timing = std::get<limiter::lease_op>(op.algorithm).timing;
  detail::lease_entry entry{{{op.now_us / timing.slice_us, held}}, {}, 0};  // one acquisition now
  entry.expires_at = detail::lease_entry_expiry(entry, op);
  s.leases.emplace(detail::compact_key(op.key), std::move(entry));
  live_.fetch_add(1, std::memory_order_relaxed);
}

void memory_backend::overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) {
  const std::int64_t now = clock_.now_seconds();
  for (const auto& op : ops) {
    switch (op.kind()) {
      case limiter::op_kind::concurrency:
        overwrite_leases(op, op.increment);
        break;
      case limiter::op_kind::gcra:
        // (as store_locked: a GCRA key lives until its arrival time has passed)
        overwrite_counter(op.key, op.increment, static_cast<std::int64_t>(op.increment / 1'000'000) + 1, now);
        break;
      case limiter::op_kind::sliding:
        overwrite_counter(std::get<limiter::sliding_window_op>(op.algorithm).previous_key, 0, 0, now);
        [[fallthrough]];
      case limiter::op_kind::count:
        overwrite_counter(op.key, op.increment, now + op.ttl_seconds, now);
        break;
    }
  }
  done.complete(nullptr);
}

}  // namespace sluice::ratelimit::backends::memory
