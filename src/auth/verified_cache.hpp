#pragma once
// Tokens that passed every check, kept until they expire so repeat callers skip the signature check.
// Sharded so io threads rarely contend; bounded: when a shard is full, expired entries go first, then any.

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "auth/jwt_verifier.hpp"

namespace sluice::auth {

class verified_cache {
 public:
  explicit verified_cache(std::size_t capacity);

  // `now` and `expires_at` in Unix seconds; an entry is usable while now <= expires_at.
  std::optional<jwt_claims> find(const std::string& key, std::int64_t now);
  void insert(std::string key, jwt_claims claims, std::int64_t expires_at, std::int64_t now);

 private:
  struct item {
    jwt_claims claims;
    std::int64_t expires_at;
  };
  struct shard {
    std::mutex mutex;
    std::unordered_map<std::string, item> items;
  };
  static constexpr std::size_t shard_count = 16;

  shard& shard_for(const std::string& key);

  std::size_t per_shard_;
  std::array<shard, shard_count> shards_;
};

}  // namespace sluice::auth
