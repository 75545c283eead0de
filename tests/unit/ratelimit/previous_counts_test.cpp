#include <doctest/doctest.h>

#include "ratelimit/backends/redis/previous_counts.hpp"

using sluice::ratelimit::backends::redis::previous_counts;
using sluice::ratelimit::limiter::counter_op;

namespace {

// A sliding op of a 10 s window at `now_us`; its previous window's key names that window's start.
counter_op sliding_at(std::int64_t now_us, std::int64_t window_us = 10'000'000) {
  static thread_local std::string key;
  counter_op op;
  op.now_us = now_us;
  key = "w_" + std::to_string(now_us / window_us * window_us - window_us);
  op.algorithm = sluice::ratelimit::limiter::sliding_window_op{0, 0, key, window_us, 0};
  return op;
}

}  // namespace

TEST_CASE("previous_counts: a previous window's count is kept once final, until the window moves on") {
  previous_counts counts;
  const std::int64_t start = 1'795'000'000'000'000;  // a multiple of 10 s
  // Within the grace (a second, for a window of 10 s) the previous window may still change: not kept.
  counts.remember(sliding_at(start + 999'999), 7);
  CHECK_FALSE(counts.find(sliding_at(start + 999'999)));
  CHECK_FALSE(counts.find(sliding_at(start + 1'000'000)));
  counts.remember(sliding_at(start + 1'000'000), 7);
  CHECK(counts.find(sliding_at(start + 1'000'000)) == 7);
  CHECK(counts.find(sliding_at(start + 9'999'999)) == 7);
  CHECK_FALSE(counts.find(sliding_at(start + 10'000'000)));  // another previous window
  CHECK_FALSE(counts.find(sliding_at(start + 11'000'000)));
  // An op of that window after it ended does not read the old count (the entry ended with the window).
  counter_op late = sliding_at(start + 10'500'000);
  static const std::string earlier = "w_" + std::to_string(start - 10'000'000);
  std::get<sluice::ratelimit::limiter::sliding_window_op>(late.algorithm).previous_key = earlier;
  CHECK_FALSE(counts.find(late));
}

TEST_CASE("previous_counts: the grace is a tenth of a short window") {
  previous_counts counts;
  const std::int64_t start = 1'795'000'000'000'000;
  counts.remember(sliding_at(start + 99'999, 1'000'000), 3);
  CHECK(counts.size() == 0);
  counts.remember(sliding_at(start + 100'000, 1'000'000), 3);
  CHECK(counts.find(sliding_at(start + 100'000, 1'000'000)) == 3);
  CHECK(counts.find(sliding_at(start + 999'999, 1'000'000)) == 3);
}

TEST_CASE("previous_counts: beyond its capacity a count is not kept, until older ones have ended") {
  previous_counts counts(1);
  const std::int64_t start = 1'795'000'000'000'000;
  counts.remember(sliding_at(start + 2'000'000, 1'000'000'000), 1);  // a window of 1000 s
  counts.remember(sliding_at(start + 2'000'000, 10'000'000), 2);     // full: not kept
  CHECK_FALSE(counts.find(sliding_at(start + 2'000'000, 10'000'000)));
  CHECK(counts.find(sliding_at(start + 2'000'000, 1'000'000'000)) == 1);
  counts.remember(sliding_at(start + 1'000'000'000 + 2'000'000, 10'000'000), 4);  // the first has ended
  CHECK(counts.find(sliding_at(start + 1'000'000'000 + 2'000'000, 10'000'000)) == 4);
  CHECK(counts.size() == 1);
}
