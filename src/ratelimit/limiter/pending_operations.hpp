#pragma once
// What a backend's decision waits for: its requests to the store, finished in any order. Every one of them
// finishes on the decision's worker thread (a worker's Redis and memcached connections, cluster nodes
// included, run on its io_context): no lock. The first error wins; the last request to finish completes the
// decision.

#include <cstddef>
#include <optional>
#include <string>

#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::limiter {

class pending_operations {
 public:
  explicit pending_operations(completion& done) : done_(done) {}

  void add(std::size_t n = 1) { outstanding_ += n; }
  void fail(std::string message, bool refused = false, bool maybe_applied = true) {
    if (!error_) error_ = backend_error{std::move(message), refused, maybe_applied};
  }
  bool failed() const { return error_.has_value(); }
  // One request finished. The last one completes the decision and returns true: the caller then frees what
  // the requests used.
  bool finish_one() {
    if (--outstanding_ != 0) return false;
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
  std::size_t outstanding_ = 0;
  std::optional<backend_error> error_;
};

}  // namespace sluice::ratelimit::limiter
