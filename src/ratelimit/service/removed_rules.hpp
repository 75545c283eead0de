#pragma once
// The rules a reload removed. Their `limit` and `window_seconds` gauges leave /metrics, /stats and the sinks
// at that reload (a removed rule has no limit to show; a rule that comes back shows them again), and the
// dashboard leaves out their series. Their counters stay, as upstream's do.

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "ratelimit/config/rule_set.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::service {

class removed_rules {
 public:
  explicit removed_rules(stats::store& stats) : stats_(stats) {}

  // The rules now in force, once their stats are made: hides the gauges of the limits that left.
  void in_force(const config::rule_set& rules);
  // Whether a (sanitized) stats key was a limit's and is no more. Thread-safe.
  bool removed(std::string_view key) const;

 private:
  stats::store& stats_;
  std::unordered_set<std::string> in_force_;  // stats keys of the limits in force (as limit_stats_key)
  mutable std::mutex mutex_;
  std::unordered_set<std::string> removed_;  // sanitized, as the dashboard's series keys
};

}  // namespace sluice::ratelimit::service
