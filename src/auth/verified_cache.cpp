#include "auth/verified_cache.hpp"

#include <algorithm>
#include <functional>

namespace sluice::auth {

verified_cache::verified_cache(std::size_t capacity)
    : per_shard_((capacity + shard_count - 1) / shard_count) {}

verified_cache::shard& verified_cache::shard_for(const std::string& key) {
  return shards_[std::hash<std::string>{}(key) % shard_count];
}

std::optional<jwt_claims> verified_cache::find(const std::string& key, std::int64_t now) {
  if (per_shard_ == 0) return std::nullopt;
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  auto it = s.items.find(key);
  if (it == s.items.end()) return std::nullopt;
  if (now > it->second.expires_at) {
    s.items.erase(it);
    return std::nullopt;
  }
  return it->second.claims;
}

void verified_cache::insert(std::string key, jwt_claims claims, std::int64_t expires_at, std::int64_t now) {
  if (per_shard_ == 0) return;
  auto& s = shard_for(key);
  std::lock_guard lock(s.mutex);
  if (s.items.size() >= per_shard_ && !s.items.contains(key)) {
    std::erase_if(s.items, [now](const auto& kv) { return now > kv.second.expires_at; });
    if (s.items.size() >= per_shard_) s.items.erase(s.items.begin());
  }
  s.items.insert_or_assign(std::move(key), item{std::move(claims), expires_at});
}

}  // namespace sluice::auth
