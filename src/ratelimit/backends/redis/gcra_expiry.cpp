#include "ratelimit/backends/redis/gcra_expiry.hpp"

#include <algorithm>
#include <functional>

#include "ratelimit/backends/redis/gcra_command.hpp"

namespace sluice::ratelimit::backends::redis {

std::uint64_t gcra_expiry::hash(std::string_view key) {
  return std::hash<std::string_view>{}(key);
}

bool gcra_expiry::due(std::string_view key, std::int64_t now_us, std::int64_t tolerance_us) {
  const std::uint64_t hash = gcra_expiry::hash(key);
  const std::int64_t slack_us = gcra_expiry_slack_ms * 1000, next = now_us + slack_us;
  if (auto it = next_due_.find(hash); it != next_due_.end()) {
    // Skipped within the slack after the last PEXPIRE; a clock set back before it sends one again.
    const std::int64_t sent_us = it->second.next_due_us - slack_us;
    if (now_us >= sent_us && now_us < it->second.next_due_us && tolerance_us <= it->second.tolerance_us)
      return false;
    it->second = {next, tolerance_us};
    return true;
  }
  if (next_due_.size() >= capacity_) {
    if (now_us < next_sweep_us_) return true;  // all recent: this key is not remembered
    next_sweep_us_ = next;
    std::erase_if(next_due_, [&](const auto& entry) {
      const std::int64_t due = entry.second.next_due_us;
      if (due > now_us) next_sweep_us_ = std::min(next_sweep_us_, due);
      return due <= now_us;
    });
    if (next_due_.size() >= capacity_) return true;
  }
  next_due_.emplace(hash, sent{next, tolerance_us});
  return true;
}

}  // namespace sluice::ratelimit::backends::redis
