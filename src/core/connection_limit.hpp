#pragma once
// MAX_CONNECTIONS: one count of client connections shared by the HTTP and gRPC listeners of every worker.
// A listener takes a slot for each connection it accepts and closes the connection at once when none is
// left, so idle or hostile clients cannot use up the file descriptors that backends and accepting need.
// Saying so is logged once when the limit is first met and once when connections are taken again.

#include <atomic>
#include <cstddef>
#include <utility>

namespace sluice::core {

class connection_limit {
 public:
  // Held by a connection for its lifetime; an empty slot holds nothing.
  class slot {
   public:
    slot() = default;
    slot(slot&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    slot& operator=(slot&& other) noexcept {
      if (this != &other) {
        release();
        owner_ = std::exchange(other.owner_, nullptr);
      }
      return *this;
    }
    ~slot() { release(); }
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    friend class connection_limit;
    explicit slot(connection_limit* owner) : owner_(owner) {}
    void release() {
      if (owner_) std::exchange(owner_, nullptr)->used_.fetch_sub(1, std::memory_order_relaxed);
    }
    connection_limit* owner_ = nullptr;
  };

  explicit connection_limit(std::size_t max) : max_(max) {}
  connection_limit(const connection_limit&) = delete;
  connection_limit& operator=(const connection_limit&) = delete;

  // Thread-safe. An empty slot when `max` connections are open: the caller closes the new connection.
  slot try_acquire();
  std::size_t in_use() const { return used_.load(std::memory_order_relaxed); }
  std::size_t max() const { return max_; }

 private:
  const std::size_t max_;
  std::atomic<std::size_t> used_{0};
  std::atomic<bool> refusing_{false};  // since a connection was last refused, none was taken
};

}  // namespace sluice::core
