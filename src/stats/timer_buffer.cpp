#include "stats/timer_buffer.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

namespace sluice::stats {

namespace {

// Threads take shards in turn, so up to shard_count threads never share one.
std::size_t this_thread_slot() {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t slot = next.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

std::uint64_t xorshift(std::uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

}  // namespace

timer_buffer::timer_buffer(std::size_t capacity_per_shard)
    : capacity_(std::max<std::size_t>(1, capacity_per_shard)) {
  for (std::size_t i = 0; i < shard_count; ++i) shards_[i].random = 0x9E3779B97F4A7C15ull * (i + 1);
}

void timer_buffer::add(timer& t, double milliseconds) {
  auto& s = shards_[this_thread_slot() % shard_count];
  std::lock_guard lock(s.mutex);
  ++s.seen;
  if (s.kept.size() < capacity_) {
    s.kept.push_back({&t, milliseconds});
    return;
  }
  // Algorithm R: the n-th observation replaces a kept one with probability capacity / n.
  auto j = xorshift(s.random) % s.seen;
  if (j < capacity_) s.kept[j] = {&t, milliseconds};
}

timer_buffer::batch timer_buffer::take() {
  batch out;
  for (auto& s : shards_) {
    std::vector<observation> kept;
    std::uint64_t seen = 0;
    {
      std::lock_guard lock(s.mutex);
      kept.swap(s.kept);
      std::swap(seen, s.seen);
    }
    out.sampled = out.sampled || seen > kept.size();
    out.kept.insert(out.kept.end(), kept.begin(), kept.end());
  }
  return out;
}

}  // namespace sluice::stats
