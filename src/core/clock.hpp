#pragma once
// Wall-clock time, injectable so window math can be tested with a fake clock.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice::core {

class clock {
 public:
  virtual ~clock() = default;
  // Microseconds since the Unix epoch (sliding windows and GCRA need sub-second time).
  virtual std::int64_t now_micros() const = 0;
  // Seconds since the Unix epoch.
  std::int64_t now_seconds() const { return now_micros() / 1'000'000; }
};

class system_clock final : public clock {
 public:
  std::int64_t now_micros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that never jumps (NTP steps, a changed date): microseconds since an arbitrary start, not the epoch.
// For measuring intervals (the quota service's demand, re-sends and idle timeouts), never for windows.
class steady_clock final : public clock {
 public:
  std::int64_t now_micros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

class fake_clock final : public clock {
 public:
  explicit fake_clock(std::int64_t seconds = 0) : now_(seconds * 1'000'000) {}
  std::int64_t now_micros() const override { return now_.load(std::memory_order_relaxed); }
  void set(std::int64_t seconds) { now_.store(seconds * 1'000'000, std::memory_order_relaxed); }
  void set_micros(std::int64_t micros) { now_.store(micros, std::memory_order_relaxed); }
  void advance(std::int64_t seconds) { now_.fetch_add(seconds * 1'000'000, std::memory_order_relaxed); }
  void advance_micros(std::int64_t micros) { now_.fetch_add(micros, std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_;
};

}  // namespace sluice::core
