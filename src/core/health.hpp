#pragma once
// The process health: healthy only while every enabled component is healthy (upstream's model: the sigterm
// component, the optional "config loaded" component, later the backend connection). Observers (the gRPC
// health service) are told of every change of the overall state.

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sluice::core {

class health {
 public:
  using observer = std::function<void(bool healthy)>;

  // Registers a component with its initial state; returns its index.
  std::size_t add_component(std::string name, bool healthy);
  void set(std::size_t component, bool healthy);
  // For a component made of parts that fail and recover on their own (one listening socket per worker):
  // unhealthy while any part is failing. Each part reports each change once.
  void part_failed(std::size_t component);
  void part_recovered(std::size_t component);
  bool healthy() const { return healthy_.load(std::memory_order_acquire); }
  // Each component's name and state, in the order they were added (for the dashboard).
  std::vector<std::pair<std::string, bool>> components() const;
  void on_change(observer o);

 private:
  void recompute_locked();

  struct entry {
    std::string name;
    bool healthy = true;
    int failing_parts = 0;
  };

  mutable std::mutex mutex_;
  std::vector<entry> components_;
  std::vector<observer> observers_;
  std::atomic<bool> healthy_{true};
};

}  // namespace sluice::core
