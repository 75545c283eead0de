#include "ratelimit/service/redis_table_cache.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::ratelimit::service {

redis_table_cache::~redis_table_cache() {
  for (const auto& [_, h] : rows_)
    if (h.rows != nullptr) h.rows->add(-1);
}

std::string redis_table_cache::key_of(std::uint32_t table, std::string_view value) {
  std::string key(sizeof table, '\0');
  std::memcpy(key.data(), &table, sizeof table);
  key += value;
  return key;
}

const redis_table_cache::cached* redis_table_cache::get(std::uint32_t table, std::string_view value) const {
  const auto it = rows_.find(key_of(table, value));
  return it == rows_.end() ? nullptr : &it->second.c;
}

bool redis_table_cache::claim_refresh(std::uint32_t table, std::string_view value, std::int64_t now_us,
                                      std::int64_t until_us) {
  const auto it = rows_.find(key_of(table, value));
  if (it == rows_.end() || it->second.c.expires_us > now_us) return false;
  it->second.c.expires_us = until_us;
  return true;
}

void redis_table_cache::put(std::uint32_t table, std::string_view value, cached c, stats::gauge* rows,
                            std::int64_t now_us) {
  auto key = key_of(table, value);
  if (auto it = rows_.find(key); it != rows_.end()) {
    it->second.c = c;
    return;
  }
  if (rows_.size() >= max_rows_) {
    auto drop = [&](const auto& kv, bool all) {
      if (!all && kv.second.c.expires_us > now_us) return false;
      if (kv.second.rows != nullptr) kv.second.rows->add(-1);
      return true;
    };
    std::erase_if(rows_, [&](const auto& kv) { return drop(kv, false); });
    if (rows_.size() >= max_rows_) std::erase_if(rows_, [&](const auto& kv) { return drop(kv, true); });
  }
  rows_.emplace(std::move(key), held{c, rows});
  if (rows != nullptr) rows->add(1);
}

}  // namespace sluice::ratelimit::service
