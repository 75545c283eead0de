#pragma once
// The stats registry: named counters created on first use and never moved, so hot paths keep plain pointers
// to them. Sharded by name so lookups from many threads rarely meet on a lock; counting is one relaxed atomic
// add.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::stats {

class counter {
 public:
  void add(std::uint64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  void inc() { add(1); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class store {
 public:
  // Returns the counter with this full name (e.g. "ratelimit.service.config_load_success"), creating it.
  counter& get_counter(std::string_view name);

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::unique_ptr<counter>, string_hash, std::equal_to<>> counters;
  };
  static constexpr std::size_t shard_count = 16;
  std::array<shard, shard_count> shards_;
};

// upstream's SanitizeStatName: ':' and '|' would break the statsd line format, so they become '_'.
std::string sanitize_stat_name(std::string_view name);

}  // namespace sluice::stats
