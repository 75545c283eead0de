#include "ratelimit/rlqs/demand_meter.hpp"

#include <algorithm>

namespace sluice::ratelimit::rlqs {

namespace {

constexpr std::uint64_t max_count = 0xffffffff;  // a report's counts and an interval's milliseconds, clamped

}  // namespace

void demand_meter::report(std::uint64_t requests, std::int64_t now_us) {
  if (requests > 0) last_busy_us_ = now_us;
  const bool first = last_report_us_ == 0;
  const std::int64_t elapsed = now_us - last_report_us_;
  last_report_us_ = now_us;
  idle_ = requests == 0;
  if (idle_) {
    count_ = 0;  // the next busy report measures from here
    return;
  }
  // Two reports in the same millisecond (a client's first report then a periodic one) merge into the current
  // interval instead of making a zero-length one.
  if (first || elapsed < 1000) {
    if (count_ > 0) {
      auto& r = recent_[(next_ + intervals - 1) % intervals].requests;
      r = static_cast<std::uint32_t>(std::min<std::uint64_t>(r + requests, max_count));
    }
    return;
  }
  recent_[next_] = {static_cast<std::uint32_t>(std::min<std::uint64_t>(requests, max_count)),
                    static_cast<std::uint32_t>(std::min<std::int64_t>(elapsed / 1000, max_count))};
  next_ = static_cast<std::uint8_t>((next_ + 1) % intervals);
  if (count_ < intervals) ++count_;
}

std::optional<double> demand_meter::rate() const {
  if (idle_) return 0.0;
  if (count_ == 0) return std::nullopt;
  std::uint64_t requests = 0;
  std::uint64_t millis = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const auto& r = recent_[(next_ + intervals - 1 - i) % intervals];
    requests += r.requests;
    millis += r.millis;
  }
  return static_cast<double>(requests) * 1e3 / static_cast<double>(millis);
}

}  // namespace sluice::ratelimit::rlqs
