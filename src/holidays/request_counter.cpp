#include "holidays/request_counter.hpp"

#include <mutex>

namespace sluice::holidays {

std::int64_t request_counter::add(std::uint64_t id) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = counts_.find(id); it != counts_.end()) return it->second->fetch_add(1) + 1;
  }
  std::unique_lock lock(mutex_);
  auto& count = counts_[id];
  if (!count) count = std::make_unique<std::atomic<std::int64_t>>(0);
  return count->fetch_add(1) + 1;
}

std::int64_t request_counter::get(std::uint64_t id) const {
  std::shared_lock lock(mutex_);
  auto it = counts_.find(id);
  return it == counts_.end() ? 0 : it->second->load();
}

}  // namespace sluice::holidays
