#pragma once
// One client's demand for one bucket, measured by the server's clock from its usage reports: requests
// (allowed + denied) per second over the last few report intervals. The client's own time_elapsed is not
// trusted (Envoy sends 0 on a bucket's first report and whole seconds after). A report of 0/0 means idle
// at once: the demand drops to zero without waiting for the average.

#include <array>
#include <cstdint>
#include <optional>

namespace sluice::ratelimit::rlqs {

class demand_meter {
 public:
  static constexpr std::size_t intervals = 3;

  // A report of `requests` (allowed + denied) arriving at `now_us`.
  void report(std::uint64_t requests, std::int64_t now_us);
  // Requests per second; nothing before a second report (no interval to divide by).
  std::optional<double> rate() const;
  // When the last report with any request arrived (0: never).
  std::int64_t last_busy_us() const { return last_busy_us_; }

 private:
  struct interval {  // 8 bytes: there is one meter per client and bucket
    std::uint32_t requests = 0;
    std::uint32_t millis = 0;
  };
  std::array<interval, intervals> recent_{};
  std::uint8_t count_ = 0;  // intervals recorded, up to `intervals` (small: one meter per client and bucket)
  std::uint8_t next_ = 0;
  std::int64_t last_report_us_ = 0;
  std::int64_t last_busy_us_ = 0;
  bool idle_ = false;
};

}  // namespace sluice::ratelimit::rlqs
