#include "core/health.hpp"

#include <algorithm>

namespace sluice::core {

std::size_t health::add_component(std::string name, bool healthy) {
  std::lock_guard lock(mutex_);
  components_.emplace_back(std::move(name), healthy);
  recompute_locked();
  return components_.size() - 1;
}

void health::set(std::size_t component, bool healthy) {
  std::lock_guard lock(mutex_);
  components_.at(component).second = healthy;
  recompute_locked();
}

void health::on_change(observer o) {
  std::lock_guard lock(mutex_);
  o(healthy_.load());
  observers_.push_back(std::move(o));
}

void health::recompute_locked() {
  bool now = std::ranges::all_of(components_, [](const auto& c) { return c.second; });
  if (healthy_.exchange(now) != now) {
    for (auto& o : observers_) o(now);
  }
}

}  // namespace sluice::core
