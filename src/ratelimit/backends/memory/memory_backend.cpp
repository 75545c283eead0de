#include "ratelimit/backends/memory/memory_backend.hpp"

#include <algorithm>
#include <cstring>

#include <boost/container/small_vector.hpp>

#include "core/strings.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "ratelimit/limiter/leases.hpp"

namespace sluice::ratelimit::backends::memory {

namespace detail {

compact_key::compact_key(std::string_view s) : data_(new char[sizeof(std::uint32_t) + s.size()]) {
  auto n = static_cast<std::uint32_t>(s.size());
  std::memcpy(data_.get(), &n, sizeof n);
  std::memcpy(data_.get() + sizeof n, s.data(), s.size());
}

std::string_view compact_key::view() const {
  std::uint32_t n = 0;
  std::memcpy(&n, data_.get(), sizeof n);
  return {data_.get() + sizeof n, n};
}

}  // namespace detail

memory_backend::memory_backend(const core::clock& clock, std::size_t max_counters)
    : clock_(clock),
      max_counters_(max_counters),
      shards_(std::make_unique<shard[]>(shard_count)),
      lease_shards_(std::make_unique<lease_shard[]>(lease_shard_count)) {}

std::int64_t detail::lease_entry_expiry(const lease_entry& e, const limiter::counter_op& op) {
  if (op.per_holder()) return e.holders.empty() ? 0 : limiter::latest_end(e.holders) / 1'000'000 + 1;
  const auto& timing = std::get<limiter::lease_op>(op.algorithm).timing;
  return e.slices.empty() ? 0 : limiter::slice_lease_end_us(e.slices.back().first, timing) / 1'000'000 + 1;
}

namespace {

limiter::lease_outcome apply_to(detail::lease_entry& e, const limiter::counter_op& op) {
  if (const auto* h = op.as<limiter::holder_op>()) {
    return limiter::apply_holder_op(e.holders, h->lease_us, op.now_us, h->holder.value_or(std::string_view()),
                                    op.increment, op.refund, h->limit);
  }
  const auto& leases = std::get<limiter::lease_op>(op.algorithm);
  return limiter::apply_lease_op(e.slices, leases.timing, op.now_us, op.increment, op.refund, leases.limit);
}

}  // namespace

bool memory_backend::apply_lease(const limiter::counter_op& op, limiter::op_result& out) {
  // (An entry past its expiry, not swept yet, holds only leases that have ended: applying the op drops them.)
  auto& s = lease_shard_for(op.key);
  std::lock_guard lock(s.mutex);
  auto it = s.leases.find(op.key);
  detail::lease_entry none{};
  auto& entry = it != s.leases.end() ? it->second : none;
  const auto r = apply_to(entry, op);
  out.value = r.value;
  out.before = r.before;
  out.expired = r.expired;
  out.oldest_end_us = r.oldest_end_us;
  out.holders = r.holders;
  out.holder_slots = r.holder_slots;
  const std::int64_t expires_at = detail::lease_entry_expiry(entry, op);
  if (expires_at == 0) {
    if (it != s.leases.end()) {
      s.leases.erase(it);
      live_.fetch_sub(1, std::memory_order_relaxed);
    }
    return true;
  }
  entry.expires_at = expires_at;
  if (it != s.leases.end()) return true;
  if (live_.load(std::memory_order_relaxed) >= max_counters_) {
    out = {};
    return false;
  }
  s.leases.emplace(detail::compact_key(op.key), std::move(entry));
  live_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::size_t memory_backend::sweep_leases(std::int64_t now) {
  std::size_t removed = 0;
  for (std::size_t i = 0; i < lease_shard_count; ++i) {
    auto& s = lease_shards_[i];
    std::lock_guard lock(s.mutex);
    removed +=
        boost::unordered::erase_if(s.leases, [now](const auto& kv) { return kv.second.expires_at <= now; });
  }
  live_.fetch_sub(removed, std::memory_order_relaxed);
  return removed;
}

std::size_t memory_backend::reclaim_locked(shard& s, std::int64_t now) {
  const std::size_t removed =
      boost::unordered::erase_if(s.counters, [now](const auto& kv) { return kv.second.expires_at <= now; });
  if (removed > 0) {
    live_.fetch_sub(removed, std::memory_order_relaxed);
    s.used.store(static_cast<std::uint32_t>(s.counters.size()), std::memory_order_relaxed);
  }
  return removed;
}

std::uint64_t memory_backend::read_locked(shard& s, std::string_view key, std::int64_t now) {
  auto it = s.counters.find(key);
  return it != s.counters.end() && it->second.expires_at > now ? it->second.value : 0;
}

bool memory_backend::store_locked(shard& s, const limiter::counter_op& op, std::uint64_t value,
                                  std::int64_t now, std::vector<undo_entry>* undo) {
  auto it = s.counters.find(op.key);
  const bool live = it != s.counters.end() && it->second.expires_at > now;
  // A GCRA key lives until its arrival time has passed: then it means the same as no key.
  const std::int64_t gcra_expiry = static_cast<std::int64_t>(value / 1'000'000) + 1;
  if (op.refund) {
    // Nothing to give back to an absent or expired counter; a counter keeps its TTL.
    if (!live) return true;
    if (undo != nullptr) undo->push_back({&s, op.key, false, it->second});
    it->second.value = value;
    if (op.kind() == limiter::op_kind::gcra) it->second.expires_at = gcra_expiry;
    return true;
  }
  if (it == s.counters.end()) {
    if (live_.load(std::memory_order_relaxed) >= max_counters_ && reclaim_locked(s, now) == 0) return false;
    it = s.counters.emplace(detail::compact_key(op.key), detail::counter_entry{0, 0}).first;
    live_.fetch_add(1, std::memory_order_relaxed);
    s.used.store(static_cast<std::uint32_t>(s.counters.size()), std::memory_order_relaxed);
    if (undo != nullptr) undo->push_back({&s, op.key, true, {}});
  } else if (undo != nullptr) {
    undo->push_back({&s, op.key, false, it->second});
  }
  it->second.value = value;
  it->second.expires_at = op.kind() == limiter::op_kind::gcra ? gcra_expiry : now + op.ttl_seconds;
  return true;
}

void memory_backend::fail_full(limiter::completion& done) const {
  limiter::backend_error error{
      core::cat("memory backend is full: ", max_counters_, " live counters (raise MEMORY_MAX_COUNTERS)")};
  done.complete(&error);
}

void memory_backend::increment(std::span<const limiter::counter_op> ops,
                               std::span<limiter::op_result> results, limiter::completion& done,
                               limiter::batch_mode mode) {
  if (mode == limiter::batch_mode::independent) return increment_each(ops, results, done);
  increment_together(ops, results, done, mode);
}

void memory_backend::increment_each(std::span<const limiter::counter_op> ops,
                                    std::span<limiter::op_result> results, limiter::completion& done) {
  const std::int64_t now = clock_.now_seconds();
  bool retried = false;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.kind() == limiter::op_kind::concurrency) {
      if (apply_lease(op, results[i])) continue;
      if (retried || !reclaim_everywhere(now)) return fail_full(done);
      retried = true;
      --i;
      continue;
    }
    // The previous window no longer changes: it is read on its own, before the current one is locked.
    std::uint64_t previous = 0;
    if (const auto* sliding = op.as<limiter::sliding_window_op>()) {
      auto& p = shard_for(sliding->previous_key);
      std::lock_guard lock(p.mutex);
      previous = read_locked(p, sliding->previous_key, now);
    }
    auto& s = shard_for(op.key);
    std::unique_lock lock(s.mutex);
    const bool admits = limiter::evaluate(op, read_locked(s, op.key, now), previous, results[i]);
    // Fixed-window counters always count (upstream's behaviour), as does usage accounting; a sliding window
    // or a GCRA arrival time changes only when the op admits.
    if (!limiter::applies(op, admits)) continue;
    if (store_locked(s, op, results[i].value, now, nullptr)) {
      retried = false;
      continue;
    }
    lock.unlock();
    if (retried || !reclaim_everywhere(now)) return fail_full(done);
    retried = true;
    --i;  // room was made: this op again, from a fresh read
  }
  done.complete(nullptr);
}

void memory_backend::increment_together(std::span<const limiter::counter_op> ops,
                                        std::span<limiter::op_result> results, limiter::completion& done,
                                        limiter::batch_mode mode) {
  if (const auto refused = limiter::refuse_concurrency_all_or_nothing(ops)) return done.complete(&*refused);
  const std::int64_t now = clock_.now_seconds();
  // Every shard the batch touches, locked in index order so that two batches cannot wait on each other.
  boost::container::small_vector<std::size_t, 8> indexes;
  auto index_of = [](std::string_view key) { return detail::key_hash{}(key) % shard_count; };
  for (const auto& op : ops) {
    indexes.push_back(index_of(op.key));
    if (const auto* sliding = op.as<limiter::sliding_window_op>())
      indexes.push_back(index_of(sliding->previous_key));
  }
  std::ranges::sort(indexes);
  indexes.erase(std::unique(indexes.begin(), indexes.end()), indexes.end());
  for (bool retried = false;; retried = true) {
    if (apply_together(ops, results, mode, indexes, now)) return done.complete(nullptr);
    // The store is full: reclaimed everywhere (which takes every shard's lock, so only with none held), the
    // batch is tried once more.
    if (retried || !reclaim_everywhere(now)) return fail_full(done);
  }
}

bool memory_backend::apply_together(std::span<const limiter::counter_op> ops,
                                    std::span<limiter::op_result> results, limiter::batch_mode mode,
                                    std::span<const std::size_t> indexes, std::int64_t now) {
  boost::container::small_vector<std::unique_lock<std::mutex>, 8> locks;
  for (auto i : indexes) locks.emplace_back(shards_[i].mutex);

  // The ops are applied in turn (a key named twice sees the first op's change) and undone unless the batch's
  // verdict admits; usage is never undone (those hits were spent).
  std::vector<undo_entry> undo;
  limiter::batch_verdict verdict;
  bool full = false;
  for (std::size_t i = 0; i < ops.size() && !full; ++i) {
    const auto& op = ops[i];
    const auto* sliding = op.as<limiter::sliding_window_op>();
    const std::uint64_t previous =
        sliding != nullptr ? read_locked(shard_for(sliding->previous_key), sliding->previous_key, now) : 0;
    auto& s = shard_for(op.key);
    const bool admitted = limiter::evaluate(op, read_locked(s, op.key, now), previous, results[i]);
    verdict.add(op, admitted);
    if (limiter::applies(op, admitted))
      full = !store_locked(s, op, results[i].value, now, op.usage ? nullptr : &undo);
  }
  if (full || !verdict.applies() || mode == limiter::batch_mode::evaluate_only) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      // A counter this batch wrote may have been reclaimed since (an arrival time already past, in a shard a
      // later op found full).
      auto& table = it->s->counters;
      auto found = table.find(it->key);
      if (found == table.end()) continue;
      if (it->created) {
        table.erase(found);
        live_.fetch_sub(1, std::memory_order_relaxed);
        it->s->used.store(static_cast<std::uint32_t>(table.size()), std::memory_order_relaxed);
      } else {
        found->second = it->before;
      }
    }
  }
  return !full;
}

void memory_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                         limiter::completion& done) {
  const std::int64_t now = clock_.now_seconds();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind() == limiter::op_kind::concurrency) continue;  // read ahead for fixed windows only
    auto& s = shard_for(ops[i].key);
    std::lock_guard lock(s.mutex);
    results[i].value = read_locked(s, ops[i].key, now);
  }
  done.complete(nullptr);
}

bool memory_backend::reclaim_everywhere(std::int64_t now) {
  // A full sweep costs a pass over every counter: at most once per second, however many requests find the
  // store full (a client filling it with new keys must not turn each of its requests into a sweep).
  std::int64_t last = last_full_sweep_.load(std::memory_order_relaxed);
  if (last < now && last_full_sweep_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    sweep(shard_count);
  }
  return live_.load(std::memory_order_relaxed) < max_counters_;
}

std::size_t memory_backend::sweep(std::size_t count) {
  const std::int64_t now = clock_.now_seconds();
  std::size_t removed = 0;
  count = std::min(count, shard_count);
  const std::size_t first = next_sweep_.fetch_add(count, std::memory_order_relaxed);
  for (std::size_t i = 0; i < count; ++i) {
    auto& s = shards_[(first + i) % shard_count];
    if (s.used.load(std::memory_order_relaxed) == 0) continue;
    std::lock_guard lock(s.mutex);
    removed += reclaim_locked(s, now);
  }
  return removed + sweep_leases(now);
}

void memory_backend::visit_live(std::int64_t now, const counter_visitor& counters,
                                const lease_visitor& leases) const {
  for (std::size_t i = 0; i < shard_count; ++i) {
    const auto& s = shards_[i];
    if (s.used.load(std::memory_order_relaxed) == 0) continue;
    std::lock_guard lock(s.mutex);
    for (const auto& [key, entry] : s.counters) {
      if (entry.expires_at > now) counters(key.view(), entry.value, entry.expires_at);
    }
  }
  if (!leases) return;
  for (std::size_t i = 0; i < lease_shard_count; ++i) {
    const auto& s = lease_shards_[i];
    std::lock_guard lock(s.mutex);
    for (const auto& [key, entry] : s.leases) {
      if (entry.expires_at > now) leases(key.view(), entry);
    }
  }
}

bool memory_backend::restore_leases(std::string_view key, detail::lease_entry leases) {
  auto& s = lease_shard_for(key);
  std::lock_guard lock(s.mutex);
  if ((leases.slices.empty() && leases.holders.empty()) || s.leases.contains(key) ||
      live_.load(std::memory_order_relaxed) >= max_counters_)
    return false;
  s.leases.emplace(detail::compact_key(key), std::move(leases));
  live_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool memory_backend::restore(std::string_view key, std::uint64_t value, std::int64_t expires_at) {
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  if (s.counters.contains(key) || live_.load(std::memory_order_relaxed) >= max_counters_) return false;
  s.counters.emplace(detail::compact_key(key), detail::counter_entry{value, expires_at});
  live_.fetch_add(1, std::memory_order_relaxed);
  s.used.store(static_cast<std::uint32_t>(s.counters.size()), std::memory_order_relaxed);
  return true;
}

std::size_t memory_backend::size() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < shard_count; ++i) {
    const auto& s = shards_[i];
    std::lock_guard lock(s.mutex);
    n += s.counters.size();
  }
  for (std::size_t i = 0; i < lease_shard_count; ++i) {
    std::lock_guard lock(lease_shards_[i].mutex);
    n += lease_shards_[i].leases.size();
  }
  return n;
}

}  // namespace sluice::ratelimit::backends::memory
