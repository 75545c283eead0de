#include "ratelimit/service/removed_rules.hpp"

namespace sluice::ratelimit::service {

void removed_rules::in_force(const config::rule_set& rules) {
  std::unordered_set<std::string> now;
  rules.for_each_limit(
      [&](std::string_view, const config::descriptor_node& node, const config::rate_limit& l) {
        if (!l.unlimited) now.insert(config::limit_stats_key(node, l));
      });
  std::lock_guard lock(mutex_);
  for (const auto& key : in_force_) {
    if (now.contains(key)) continue;
    const auto prefix = config::rule_stats::prefix(key);
    stats_.get_gauge(prefix + "limit").hide();
    stats_.get_gauge(prefix + "window_seconds").hide();
    removed_.insert(stats::sanitize_stat_name(key));
  }
  for (const auto& key : now) removed_.erase(stats::sanitize_stat_name(key));
  in_force_ = std::move(now);
}

bool removed_rules::removed(std::string_view key) const {
  std::lock_guard lock(mutex_);
  return removed_.contains(std::string(key));
}

}  // namespace sluice::ratelimit::service
