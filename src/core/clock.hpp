#pragma once
// Wall-clock seconds, injectable so window math can be tested with a fake clock.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice::core {

class clock {
 public:
  virtual ~clock() = default;
  // Seconds since the Unix epoch.
  virtual std::int64_t now_seconds() const = 0;
};

class system_clock final : public clock {
 public:
  std::int64_t now_seconds() const override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class fake_clock final : public clock {
 public:
  explicit fake_clock(std::int64_t now = 0) : now_(now) {}
  std::int64_t now_seconds() const override { return now_.load(std::memory_order_relaxed); }
  void set(std::int64_t now) { now_.store(now, std::memory_order_relaxed); }
  void advance(std::int64_t seconds) { now_.fetch_add(seconds, std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_;
};

}  // namespace sluice::core
