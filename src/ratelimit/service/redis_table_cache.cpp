#include "ratelimit/service/redis_table_cache.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::ratelimit::service {

redis_table_cache::redis_table_cache(std::size_t max_rows)
    : max_per_shard_(std::max<std::size_t>(1, max_rows / shard_count)) {}

redis_table_cache::~redis_table_cache() {
  for (auto& s : shards_)
    for (const auto& [_, h] : s.rows)
      if (h.rows != nullptr) h.rows->add(-1);
}

std::string redis_table_cache::key_of(std::uint32_t table, std::string_view value) {
  std::string key(sizeof table, '\0');
  std::memcpy(key.data(), &table, sizeof table);
  key += value;
  return key;
}

std::optional<redis_table_cache::cached> redis_table_cache::get(std::uint32_t table,
                                                                std::string_view value) const {
  const auto key = key_of(table, value);
  const auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  const auto it = s.rows.find(key);
  if (it == s.rows.end()) return std::nullopt;
  return it->second.c;
}

bool redis_table_cache::claim_refresh(std::uint32_t table, std::string_view value, std::int64_t now_us,
                                      std::int64_t until_us) {
  const auto key = key_of(table, value);
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  const auto it = s.rows.find(key);
  if (it == s.rows.end() || it->second.c.expires_us > now_us) return false;
  it->second.c.expires_us = until_us;
  return true;
}

void redis_table_cache::put(std::uint32_t table, std::string_view value, cached c, stats::gauge* rows,
                            std::int64_t now_us) {
  auto key = key_of(table, value);
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  if (auto it = s.rows.find(key); it != s.rows.end()) {
    it->second.c = c;
    return;
  }
  if (s.rows.size() >= max_per_shard_) {
    auto drop = [&](const auto& kv, bool all) {
      if (!all && kv.second.c.expires_us > now_us) return false;
      if (kv.second.rows != nullptr) kv.second.rows->add(-1);
      return true;
    };
    std::erase_if(s.rows, [&](const auto& kv) { return drop(kv, false); });
    if (s.rows.size() >= max_per_shard_)
      std::erase_if(s.rows, [&](const auto& kv) { return drop(kv, true); });
  }
  s.rows.emplace(std::move(key), held{c, rows});
  if (rows != nullptr) rows->add(1);
}

std::size_t redis_table_cache::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    n += s.rows.size();
  }
  return n;
}

}  // namespace sluice::ratelimit::service
