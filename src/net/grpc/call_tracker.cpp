#include "net/grpc/call_tracker.hpp"

#include <thread>

namespace sluice::net::grpc {

bool call_tracker::wait_idle(std::chrono::steady_clock::time_point deadline) const {
  while (in_flight_.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace sluice::net::grpc
