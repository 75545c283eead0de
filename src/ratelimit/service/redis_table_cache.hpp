#pragma once
// One worker's rows of the Redis limit tables (LIMIT_TABLES_REDIS): those it read and those the other
// workers read and sent it (table_lookup shares each row read), so every worker holds the same rows and,
// while Redis cannot be read, applies the same one. No lock: used on its worker's thread only. A full cache
// drops its expired rows, and starts over when none has expired.

#include <cstdint>
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
  explicit redis_table_cache(std::size_t max_rows = 1 << 20) : max_rows_(max_rows) {}
  ~redis_table_cache();
  redis_table_cache(const redis_table_cache&) = delete;
  redis_table_cache& operator=(const redis_table_cache&) = delete;

  struct cached {
    std::optional<config::table_row> row;  // nullopt: the hash has no (good) field for the value
    std::int64_t expires_us = 0;           // steady clock
  };
  const cached* get(std::uint32_t table, std::string_view value) const;
  // Whether the caller is the one to read an expired row again: true once (its expiry moves to `until`, so
  // the next decisions keep using the row meanwhile), false when the row is fresh or already claimed.
  bool claim_refresh(std::uint32_t table, std::string_view value, std::int64_t now_us, std::int64_t until_us);
  // Sets the value's row; `rows` (the table's gauge, may be null) counts the values held.
  void put(std::uint32_t table, std::string_view value, cached c, stats::gauge* rows, std::int64_t now_us);
  std::size_t size() const { return rows_.size(); }

 private:
  struct held {
    cached c;
    stats::gauge* rows = nullptr;
  };
  static std::string key_of(std::uint32_t table, std::string_view value);

  std::size_t max_rows_;
  std::unordered_map<std::string, held, config::string_hash, std::equal_to<>> rows_;
};

}  // namespace sluice::ratelimit::service
