#pragma once
// The rows of Redis limit tables (LIMIT_TABLES_REDIS) read so far, shared by every worker: a value read by
// one is known to all, and while Redis cannot be read every worker applies the same cached row. Sharded, each
// shard under its own lock (as the local over-limit cache); a full shard drops its expired rows, and starts
// over when none has expired.

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ratelimit/config/limit_table.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::service {

class redis_table_cache {
 public:
  explicit redis_table_cache(std::size_t max_rows = 1 << 20);
  ~redis_table_cache();
  redis_table_cache(const redis_table_cache&) = delete;
  redis_table_cache& operator=(const redis_table_cache&) = delete;

  struct cached {
    std::optional<config::table_row> row;  // nullopt: the hash has no (good) field for the value
    std::int64_t expires_us = 0;           // steady clock
  };
  std::optional<cached> get(std::uint32_t table, std::string_view value) const;
  // Whether the caller is the one to read an expired row again: true once (its expiry moves to `until`, so
  // the others keep using the row meanwhile), false when the row is fresh or another caller claimed it first.
  bool claim_refresh(std::uint32_t table, std::string_view value, std::int64_t now_us, std::int64_t until_us);
  // Sets the value's row; `rows` (the table's gauge, may be null) counts the values held.
  void put(std::uint32_t table, std::string_view value, cached c, stats::gauge* rows, std::int64_t now_us);
  std::size_t size() const;

 private:
  struct held {
    cached c;
    stats::gauge* rows = nullptr;
  };
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, held, config::string_hash, std::equal_to<>> rows;
  };
  static constexpr std::size_t shard_count = 16;
  static std::string key_of(std::uint32_t table, std::string_view value);
  const shard& shard_for(std::string_view key) const {
    return shards_[std::hash<std::string_view>{}(key) % shard_count];
  }
  shard& shard_for(std::string_view key) { return shards_[std::hash<std::string_view>{}(key) % shard_count]; }

  std::size_t max_per_shard_;
  std::array<shard, shard_count> shards_;
};

}  // namespace sluice::ratelimit::service
