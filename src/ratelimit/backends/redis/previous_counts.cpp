#include "ratelimit/backends/redis/previous_counts.hpp"

#include <algorithm>
#include <functional>
#include <string_view>

namespace sluice::ratelimit::backends::redis {

namespace {

// When the op's current window started, and whether its previous window is final by the op's time.
struct window_times {
  std::int64_t start_us;
  bool previous_final;
};

window_times times_of(const limiter::counter_op& op) {
  const std::int64_t start = op.now_us - op.now_us % op.window_us;
  const std::int64_t grace = std::min<std::int64_t>(1'000'000, op.window_us / 10);
  return {start, op.now_us >= start + grace};
}

std::uint64_t hash_of(std::string_view key) {
  return std::hash<std::string_view>{}(key);
}

}  // namespace

std::optional<std::uint64_t> previous_counts::find(const limiter::counter_op& op) {
  if (op.window_us <= 0 || !times_of(op).previous_final) return std::nullopt;
  const std::uint64_t hash = hash_of(op.previous_key);
  std::lock_guard lock(mutex_);
  auto it = entries_.find(hash);
  // The entry's window is the op's previous one while it lasts (a later window has another key).
  if (it == entries_.end() || op.now_us >= it->second.until_us) return std::nullopt;
  return it->second.count;
}

void previous_counts::remember(const limiter::counter_op& op, std::uint64_t count) {
  if (op.window_us <= 0) return;
  const auto times = times_of(op);
  if (!times.previous_final) return;
  const std::int64_t until = times.start_us + op.window_us;
  const std::uint64_t hash = hash_of(op.previous_key);
  std::lock_guard lock(mutex_);
  if (entries_.size() >= capacity_ && !entries_.contains(hash)) {
    if (op.now_us < next_sweep_us_) return;
    next_sweep_us_ = until;
    std::erase_if(entries_, [&](const auto& e) {
      if (e.second.until_us > op.now_us) next_sweep_us_ = std::min(next_sweep_us_, e.second.until_us);
      return e.second.until_us <= op.now_us;
    });
    if (entries_.size() >= capacity_) return;
  }
  entries_[hash] = {count, until};
}

std::size_t previous_counts::size() {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace sluice::ratelimit::backends::redis
