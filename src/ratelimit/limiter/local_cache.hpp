#pragma once
// The local over-limit cache (LOCAL_CACHE_SIZE_IN_BYTES): keys known to be over their limit for the rest of
// their window, so the counter store is not asked again. Sharded; each shard holds at most its share of the
// byte budget (key bytes + a fixed per-entry overhead) and, when full, drops expired entries first and then
// the entry that expires soonest. Each key keeps the limit it went over: a request whose limit is higher (a
// larger override, a limit table's row raised since, a reload) is not refused by it but asks the store.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ratelimit/config/rule_set.hpp"

namespace sluice::ratelimit::limiter {

class local_cache {
 public:
  // As upstream's freecache, a non-zero size below 512 KiB is raised to 512 KiB.
  static constexpr std::size_t minimum_bytes = 512 * 1024;
  static constexpr std::size_t entry_overhead = 64;

  explicit local_cache(std::size_t size_bytes);
  bool enabled() const { return budget_per_shard_ > 0; }
  // True if `key` was inserted, has not expired at `now`, and went over a limit of `limit` or more.
  bool contains(std::string_view key, std::int64_t now, std::uint32_t limit);
  // `key` went over `limit`, for the rest of its window (until `expires_at`).
  void insert(std::string_view key, std::int64_t expires_at, std::int64_t now, std::uint32_t limit);
  // A refund (negative hits) may bring the key back under its limit.
  void erase(std::string_view key);
  std::size_t size() const;

 private:
  struct shard {
    mutable std::mutex mutex;
    struct over {
      std::int64_t expires_at;
      std::uint32_t limit;
    };
    std::unordered_map<std::string, over, config::string_hash, std::equal_to<>> expiry;
    std::multimap<std::int64_t, std::string> by_expiry;
    std::size_t bytes = 0;
  };
  static constexpr std::size_t shard_count = 32;
  shard& shard_for(std::string_view key) { return shards_[std::hash<std::string_view>{}(key) % shard_count]; }
  void erase_locked(shard& s, std::multimap<std::int64_t, std::string>::iterator it);
  void erase_key_locked(shard& s, std::string_view key);

  std::size_t budget_per_shard_ = 0;
  std::array<shard, shard_count> shards_;
};

}  // namespace sluice::ratelimit::limiter
