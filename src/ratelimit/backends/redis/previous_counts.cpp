#include "ratelimit/backends/redis/previous_counts.hpp"

#include <algorithm>

#include "ratelimit/limiter/algorithms.hpp"

namespace sluice::ratelimit::backends::redis {

namespace {

// When the op's current window started, and whether its previous window is final by the op's time.
struct window_times {
  std::int64_t start_us;
  bool previous_final;
};

window_times times_of(const limiter::sliding_window_op& sliding, std::int64_t now_us) {
  const std::int64_t start = limiter::sliding_start(sliding, now_us);
  const std::int64_t grace = std::min<std::int64_t>(1'000'000, sliding.window_us / 10);
  return {start, now_us >= start + grace};
}

}  // namespace

std::optional<std::uint64_t> previous_counts::find(const limiter::counter_op& op) {
  const auto* sliding = op.as<limiter::sliding_window_op>();
  if (sliding == nullptr || sliding->window_us <= 0 || !times_of(*sliding, op.now_us).previous_final)
    return std::nullopt;
  const std::uint64_t hash = counts_.hash(sliding->previous_key);
  // The entry's window is the op's previous one while it lasts (a later window has another key).
  const std::uint64_t* count = counts_.find(hash, op.now_us);
  return count != nullptr ? std::optional(*count) : std::nullopt;
}

void previous_counts::remember(const limiter::counter_op& op, std::uint64_t count) {
  const auto* sliding = op.as<limiter::sliding_window_op>();
  if (sliding == nullptr || sliding->window_us <= 0) return;
  const auto times = times_of(*sliding, op.now_us);
  if (!times.previous_final) return;
  const std::uint64_t hash = counts_.hash(sliding->previous_key);
  counts_.put(hash, count, times.start_us + sliding->window_us, op.now_us);
}

std::size_t previous_counts::size() {
  return counts_.size();
}

}  // namespace sluice::ratelimit::backends::redis
