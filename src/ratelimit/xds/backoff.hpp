#pragma once
// The wait before each new attempt to reach the xDS server: exponential, from
// XDS_CLIENT_BACKOFF_INITIAL_INTERVAL doubling up to XDS_CLIENT_BACKOFF_MAX_INTERVAL; with
// XDS_CLIENT_BACKOFF_JITTER each wait is spread by ±XDS_CLIENT_BACKOFF_RANDOM_FACTOR of itself (never past
// the maximum), so a fleet does not reconnect in step. reset() after a stream that worked starts again from
// the initial wait. (Upstream passes the random factor as the multiplier, which with its default 0.5 makes
// every wait the initial 10 s, and never resets.)

#include <chrono>
#include <functional>

namespace sluice::ratelimit::xds {

struct backoff_settings {
  std::chrono::milliseconds initial{10'000};
  std::chrono::milliseconds max{60'000};
  double random_factor = 0.5;  // 0..1
  bool jitter = true;
};

class backoff {
 public:
  // `uniform` returns a number in [0, 1): a test gives a fixed one.
  explicit backoff(backoff_settings settings, std::function<double()> uniform = {});

  std::chrono::milliseconds next();
  void reset() { attempt_ = 0; }

 private:
  backoff_settings settings_;
  std::function<double()> uniform_;
  unsigned attempt_ = 0;
};

}  // namespace sluice::ratelimit::xds
