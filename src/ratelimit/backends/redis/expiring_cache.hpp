#pragma once
// A worker's small memory of facts about Redis keys that hold until a time: values by the key's 64-bit hash,
// each with its end, at most `capacity` of them. When full, the entries that ended are swept (at most once
// until the earliest end left); a value that finds no room is not kept, so the caller does what it would
// without the cache. Not thread-safe.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <unordered_map>

namespace sluice::ratelimit::backends::redis {

template <typename Value>
class expiring_cache {
 public:
  explicit expiring_cache(std::size_t capacity) : capacity_(capacity) {}

  static std::uint64_t hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

  // The value kept under `key_hash`, while `now_us` is before its end; null otherwise.
  const Value* find(std::uint64_t key_hash, std::int64_t now_us) const {
    auto it = entries_.find(key_hash);
    return it == entries_.end() || now_us >= it->second.until_us ? nullptr : &it->second.value;
  }

  // Keeps `value` until `until_us` (replacing what the key had), when there is room.
  void put(std::uint64_t key_hash, const Value& value, std::int64_t until_us, std::int64_t now_us) {
    if (entries_.size() >= capacity_ && !entries_.contains(key_hash)) {
      if (now_us < next_sweep_us_) return;
      next_sweep_us_ = until_us;
      std::erase_if(entries_, [&](const auto& e) {
        if (e.second.until_us > now_us) next_sweep_us_ = std::min(next_sweep_us_, e.second.until_us);
        return e.second.until_us <= now_us;
      });
      if (entries_.size() >= capacity_) return;
    }
    entries_[key_hash] = {value, until_us};
  }

  void erase(std::uint64_t key_hash) { entries_.erase(key_hash); }
  std::size_t size() const { return entries_.size(); }

 private:
  struct entry {
    Value value;
    std::int64_t until_us;
  };
  std::size_t capacity_;
  std::unordered_map<std::uint64_t, entry> entries_;
  std::int64_t next_sweep_us_ = 0;  // when full: no entry ends before then
};

}  // namespace sluice::ratelimit::backends::redis
