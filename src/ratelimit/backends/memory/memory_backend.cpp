#include "ratelimit/backends/memory/memory_backend.hpp"

#include <algorithm>
#include <cstring>

#include "core/strings.hpp"

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
    : clock_(clock), max_counters_(max_counters), shards_(std::make_unique<shard[]>(shard_count)) {}

std::size_t memory_backend::reclaim_locked(shard& s, std::int64_t now) {
  const std::size_t removed =
      boost::unordered::erase_if(s.counters, [now](const auto& kv) { return kv.second.expires_at <= now; });
  if (removed > 0) {
    live_.fetch_sub(removed, std::memory_order_relaxed);
    s.used.store(static_cast<std::uint32_t>(s.counters.size()), std::memory_order_relaxed);
  }
  return removed;
}

void memory_backend::increment(std::span<const limiter::counter_op> ops, std::span<std::uint64_t> results,
                               limiter::completion& done) {
  const std::int64_t now = clock_.now_seconds();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    const std::size_t hash = detail::key_hash{}(op.key);
    auto& s = shard_for(hash);
    std::unique_lock lock(s.mutex);
    auto it = s.counters.find(op.key);
    if (op.refund) {
      // Nothing to give back to an absent or expired counter; never below 0; the TTL stays.
      const bool live = it != s.counters.end() && it->second.expires_at > now;
      if (live) it->second.value -= std::min(it->second.value, op.increment);
      results[i] = live ? it->second.value : 0;
      continue;
    }
    if (it == s.counters.end()) {
      if (live_.load(std::memory_order_relaxed) >= max_counters_ && reclaim_locked(s, now) == 0) {
        lock.unlock();
        if (!reclaim_everywhere(now)) {
          limiter::backend_error error{core::cat("memory backend is full: ", max_counters_,
                                                 " live counters (raise MEMORY_MAX_COUNTERS)")};
          done.complete(&error);
          return;
        }
        lock.lock();
        it = s.counters.find(op.key);  // another thread may have made it meanwhile
      }
    }
    if (it == s.counters.end()) {
      it = s.counters.emplace(detail::compact_key(op.key), detail::counter_entry{0, 0}).first;
      live_.fetch_add(1, std::memory_order_relaxed);
      s.used.store(static_cast<std::uint32_t>(s.counters.size()), std::memory_order_relaxed);
    } else if (it->second.expires_at <= now) {
      it->second.value = 0;  // expired but not yet swept: a fresh counter, as in Redis
    }
    it->second.value += op.increment;
    it->second.expires_at = now + op.ttl_seconds;
    results[i] = it->second.value;
  }
  done.complete(nullptr);
}

void memory_backend::get(std::span<const limiter::counter_op> ops, std::span<std::uint64_t> results,
                         limiter::completion& done) {
  const std::int64_t now = clock_.now_seconds();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    auto& s = shard_for(detail::key_hash{}(ops[i].key));
    std::lock_guard lock(s.mutex);
    auto it = s.counters.find(ops[i].key);
    results[i] = it != s.counters.end() && it->second.expires_at > now ? it->second.value : 0;
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
  return removed;
}

std::size_t memory_backend::size() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < shard_count; ++i) {
    const auto& s = shards_[i];
    std::lock_guard lock(s.mutex);
    n += s.counters.size();
  }
  return n;
}

}  // namespace sluice::ratelimit::backends::memory
