#pragma once
// Counts a service's in-flight calls so shutdown can be graceful without gRPC's own deadline wait: gRPC C++'s
// Shutdown(deadline) also waits for idle client connections to close, which Envoy never does by itself. With
// this, a stop refuses new calls at once, waits only for the calls in flight, then shuts gRPC down
// immediately.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice::net::grpc {

class call_tracker {
 public:
  // False once draining: the caller must refuse the call (UNAVAILABLE).
  bool enter() {
    in_flight_.fetch_add(1, std::memory_order_acq_rel);
    if (draining_.load(std::memory_order_acquire)) {
      leave();
      return false;
    }
    return true;
  }
  void leave() { in_flight_.fetch_sub(1, std::memory_order_acq_rel); }

  void start_draining() { draining_.store(true, std::memory_order_release); }
  // Waits (polling) until no call is in flight or the deadline passes; true when idle.
  bool wait_idle(std::chrono::steady_clock::time_point deadline) const;

 private:
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace sluice::net::grpc
