#pragma once
// Timer observations waiting for the next flush. Requests record timers from every thread, so the buffer is
// sharded by thread: a record takes one uncontended lock. Each shard keeps at most `capacity` observations
// per interval; past that it keeps a uniform sample (reservoir sampling), and the sink writes the kept values
// with a sample rate so that statsd still counts every observation.

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "stats/store.hpp"

namespace sluice::stats {

class timer_buffer {
 public:
  struct observation {
    timer* t;
    double milliseconds;
  };
  struct batch {
    std::vector<observation> kept;
    bool sampled = false;  // some shard saw more than it kept
  };

  explicit timer_buffer(std::size_t capacity_per_shard = 8192);

  void add(timer& t, double milliseconds);
  // Everything added since the last take.
  batch take();

 private:
  struct alignas(64) shard {
    std::mutex mutex;
    std::vector<observation> kept;
    std::uint64_t seen = 0;
    std::uint64_t random = 0;
  };
  static constexpr std::size_t shard_count = 16;

  const std::size_t capacity_;
  std::array<shard, shard_count> shards_;
};

}  // namespace sluice::stats
