#include "ratelimit/xds/backoff.hpp"

#include <algorithm>
#include <random>

namespace sluice::ratelimit::xds {

backoff::backoff(backoff_settings settings, std::function<double()> uniform)
    : settings_(settings), uniform_(std::move(uniform)) {
  if (!uniform_) {
    uniform_ = [rng = std::minstd_rand{std::random_device{}()}]() mutable {
      return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    };
  }
}

std::chrono::milliseconds backoff::next() {
  const double max = static_cast<double>(settings_.max.count());
  double wait = static_cast<double>(settings_.initial.count());
  for (unsigned i = 0; i < attempt_ && wait < max; ++i) wait *= 2;
  wait = std::min(wait, max);
  ++attempt_;
  if (settings_.jitter) {
    const double spread = std::clamp(settings_.random_factor, 0.0, 1.0) * wait;
    wait = std::min(max, wait - spread + 2 * spread * uniform_());
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(wait));
}

}  // namespace sluice::ratelimit::xds
