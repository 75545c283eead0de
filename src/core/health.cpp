#include "core/health.hpp"

#include <algorithm>

namespace sluice::core {

std::size_t health::add_component(std::string name, bool healthy) {
  std::lock_guard lock(mutex_);
  components_.push_back({std::move(name), healthy, 0});
  recompute_locked();
  return components_.size() - 1;
}

void health::set(std::size_t component, bool healthy) {
  std::lock_guard lock(mutex_);
  components_.at(component).healthy = healthy;
  recompute_locked();
}

void health::part_failed(std::size_t component) {
  std::lock_guard lock(mutex_);
  ++components_.at(component).failing_parts;
  recompute_locked();
}

void health::part_recovered(std::size_t component) {
  std::lock_guard lock(mutex_);
  --components_.at(component).failing_parts;
  recompute_locked();
}

void health::on_change(observer o) {
  std::lock_guard lock(mutex_);
  o(healthy_.load());
  observers_.push_back(std::move(o));
}

std::vector<std::pair<std::string, bool>> health::components() const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, bool>> out;
  out.reserve(components_.size());
  for (const auto& c : components_) out.emplace_back(c.name, c.healthy && c.failing_parts == 0);
  return out;
}

void health::recompute_locked() {
  bool now =
      std::ranges::all_of(components_, [](const entry& c) { return c.healthy && c.failing_parts == 0; });
  if (healthy_.exchange(now) != now) {
    for (auto& o : observers_) o(now);
  }
}

}  // namespace sluice::core
