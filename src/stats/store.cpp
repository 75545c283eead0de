#include "stats/store.hpp"

#include <algorithm>

namespace sluice::stats {

counter& store::get_counter(std::string_view name) {
  auto& s = shards_[std::hash<std::string_view>{}(name) % shard_count];
  std::lock_guard lock(s.mutex);
  auto it = s.counters.find(name);
  if (it == s.counters.end()) {
    it = s.counters.emplace(std::string(name), std::make_unique<counter>()).first;
  }
  return *it->second;
}

std::string sanitize_stat_name(std::string_view name) {
  std::string out(name);
  std::ranges::replace(out, ':', '_');
  std::ranges::replace(out, '|', '_');
  return out;
}

}  // namespace sluice::stats
