#include "ratelimit/limiter/local_cache.hpp"

#include <algorithm>

namespace sluice::ratelimit::limiter {

local_cache::local_cache(std::size_t size_bytes) {
  if (size_bytes > 0) budget_per_shard_ = std::max(size_bytes, minimum_bytes) / shard_count;
}

bool local_cache::contains(std::string_view key, std::int64_t now, std::uint32_t limit) {
  if (!enabled()) return false;
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.expiry.find(key);
  return it != s.expiry.end() && it->second.expires_at > now && limit <= it->second.limit;
}

void local_cache::erase_locked(shard& s, std::multimap<std::int64_t, std::string>::iterator it) {
  s.bytes -= it->second.size() + entry_overhead;
  s.expiry.erase(it->second);
  s.by_expiry.erase(it);
}

void local_cache::erase_key_locked(shard& s, std::string_view key) {
  auto found = s.expiry.find(key);
  if (found == s.expiry.end()) return;
  auto range = s.by_expiry.equal_range(found->second.expires_at);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second == key) return erase_locked(s, it);
  }
}

void local_cache::erase(std::string_view key) {
  if (!enabled()) return;
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  erase_key_locked(s, key);
}

void local_cache::insert(std::string_view key, std::int64_t expires_at, std::int64_t now,
                         std::uint32_t limit) {
  if (!enabled()) return;
  std::size_t cost = key.size() + entry_overhead;
  if (cost > budget_per_shard_) return;
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  erase_key_locked(s, key);
  // Expired entries sort first, so this drops them before any live one.
  while (s.bytes + cost > budget_per_shard_ || (!s.by_expiry.empty() && s.by_expiry.begin()->first <= now)) {
    erase_locked(s, s.by_expiry.begin());
  }
  s.expiry.emplace(std::string(key), shard::over{expires_at, limit});
  s.by_expiry.emplace(expires_at, std::string(key));
  s.bytes += cost;
}

std::size_t local_cache::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    n += s.expiry.size();
  }
  return n;
}

}  // namespace sluice::ratelimit::limiter
