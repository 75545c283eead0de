#pragma once
// What a backend's decision waits for: its requests to the store, finished in any order and possibly on
// other threads (a Redis Cluster's nodes). The first error wins; the last request to finish completes the
// decision.

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::limiter {

class pending_operations {
 public:
  explicit pending_operations(completion& done) : done_(done) {}

  void add(std::size_t n = 1) { outstanding_.fetch_add(n, std::memory_order_relaxed); }
  void fail(std::string message, bool refused = false) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = backend_error{std::move(message), refused};
  }
  bool failed() {
    std::lock_guard lock(mutex_);
    return error_.has_value();
  }
  // One request finished. The last one completes the decision and returns true: the caller then frees what
  // the requests used.
  bool finish_one() {
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    if (error_) {
      backend_error e{std::move(*error_)};
      done_.complete(&e);
    } else {
      done_.complete(nullptr);
    }
    return true;
  }

 private:
  completion& done_;
  std::atomic<std::size_t> outstanding_{0};
  std::mutex mutex_;
  std::optional<backend_error> error_;
};

}  // namespace sluice::ratelimit::limiter
