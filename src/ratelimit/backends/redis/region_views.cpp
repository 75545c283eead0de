// region_reader's second half: what a round's answers make — each remote region's state (reachable or not,
// its totals and their rates, logged once per change), the gauges, and the view the workers get.

#include "ratelimit/backends/redis/region_reader.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/backends/redis/region_round.hpp"
#include "ratelimit/config/rule_set.hpp"

namespace sluice::ratelimit::backends::redis {

void region_reader::set_reachable(remote& region, bool reachable, const std::string& why) {
  region.reachable_gauge->set(reachable ? 1 : 0);
  const bool was = region.reachable.value_or(true);
  region.reachable = reachable;
  if (was == reachable) return;
  if (!reachable) {
    region.why = why;
    core::log_error("region ", region.name, " is unreachable: ", why,
                    settings_.fallback == remote_fallback::share
                        ? "; each region takes its share of what is left of each limit"
                        : "; its last totals count until their windows end");
  } else {
    core::log_warn("region ", region.name, " is reachable again (it was unreachable: ", region.why, ")");
  }
}

void region_reader::finish(round_state& r) {
  r.finished = true;
  deadline_.cancel();
  in_flight_.reset();
  const auto now_ms = r.started_us / 1000;
  const auto max_lag = settings_.max_lag.count();
  for (std::size_t i = 0; i < remotes_.size(); ++i) {
    auto& region = *remotes_[i];
    auto& a = r.answers[i];
    region.round_trip_ms = a.round_trip_ms;
    region.rtt_gauge->set(a.round_trip_ms);
    if (a.ok) region.last_io_gauge->set(a.health.replica ? a.health.last_io_s : 0);
    std::string why;
    if (a.ok && !a.health.link_up) {
      why = "its replica's link to its primary is down (master_link_status:down)";
    } else if (a.ok && a.health.heartbeat_ms && now_ms - *a.health.heartbeat_ms > max_lag) {
      why = core::cat("its newest heartbeat is ", now_ms - *a.health.heartbeat_ms,
                      "ms old (REDIS_REMOTE_MAX_LAG is ", max_lag, "ms)");
    }
    if (a.ok && why.empty()) {
      const double seconds = region.read_ms > 0 ? static_cast<double>(now_ms - region.read_ms) / 1000.0 : 0.0;
      const double weight = std::min(1.0, seconds);  // the rates' smoothing: a time constant of a second
      for (std::size_t k = 0; k < r.keys.size(); ++k) {
        auto& last = region.totals[r.keys[k].how->slot];
        remote::key_total now{a.totals[k], 0};
        if (seconds > 0) {
          const double grew = now.total > last.total ? static_cast<double>(now.total - last.total) : 0;
          now.rate = last.rate + weight * (grew / seconds - last.rate);
        }
        last = now;
      }
      region.read_ms = now_ms;
      region.heartbeat_ms = a.health.heartbeat_ms.value_or(now_ms);
      region.cannot_see = a.health.cannot_see;
      set_reachable(region, true, {});
    } else {
      if (why.empty()) why = a.error.empty() ? "no reply" : a.error;
      // A failed read alone keeps the last totals, as long as they are young enough.
      const bool fresh = a.ok ? false : region.read_ms > 0 && now_ms - region.heartbeat_ms <= max_lag;
      if (!fresh) set_reachable(region, false, why);
      if (a.ok) {
        region.heartbeat_ms =
            std::min(region.heartbeat_ms, a.health.heartbeat_ms.value_or(region.heartbeat_ms));
        region.cannot_see = a.health.cannot_see;
      }
    }
    const auto age = region.read_ms > 0 ? now_ms - region.heartbeat_ms : 0;
    region.age_gauge->set(age);
    region.lag_gauge->set(region.read_ms > 0 ? std::max<std::int64_t>(0, region.read_ms - region.heartbeat_ms)
                                             : 0);
  }
  if (r.reads_local && r.local.ok) {
    for (std::size_t k = 0; k < r.keys.size(); ++k) local_counts_[r.keys[k].how->slot] = r.local.totals[k];
  }
  set_overshoot(r);
  auto view = build_view(r.started_us);
  view_ = view;
  workers_.publish(std::move(view));
}

// The most a window may admit past its limit at the rates seen: per key, what the other regions add while
// this one cannot know it yet (their rate × (interval + lag + round trip)); per rule the worst of its keys.
void region_reader::set_overshoot(const round_state& r) {
  std::unordered_map<std::string_view, double> per_rule;
  double worst = 0;
  for (const auto& k : r.keys) {
    if (k.how->previous) continue;
    double over = 0;
    for (const auto& region : remotes_) {
      if (!region->reachable.value_or(true)) continue;
      const auto lag = std::max<std::int64_t>(0, region->read_ms - region->heartbeat_ms);
      over += region->totals[k.how->slot].rate *
              static_cast<double>(settings_.sync_interval.count() + lag + region->round_trip_ms) / 1000.0;
    }
    worst = std::max(worst, over);
    if (!k.how->rule.empty()) {
      auto& rule = per_rule[k.how->rule];
      rule = std::max(rule, over);
    }
  }
  worst_overshoot_.set(std::llround(worst));
  for (auto& [rule, gauge] : rule_overshoot_) {
    auto it = per_rule.find(rule);
    gauge->set(it == per_rule.end() ? 0 : std::llround(it->second));
    if (it != per_rule.end()) per_rule.erase(it);
  }
  for (const auto& [rule, over] : per_rule) {
    auto& gauge = stats_.get_gauge(core::cat(config::rule_stats::prefix(rule), "region_overshoot"));
    gauge.set(std::llround(over));
    rule_overshoot_.emplace(std::string(rule), &gauge);
  }
}

remote_view_ptr region_reader::build_view(std::int64_t now_us) {
  const auto now_ms = now_us / 1000;
  bool partition = false;
  for (const auto& region : remotes_) {
    partition = partition || !region->reachable.value_or(true) || !region->cannot_see.empty();
  }
  const bool share = settings_.fallback == remote_fallback::share && partition;
  if (share != sharing_) {
    sharing_ = share;
    sharing_since_us_ = now_us;
    std::ranges::fill(shared_, unshared);
    sharing_gauge_.set(share ? 1 : 0);
  }
  auto view = std::make_shared<remote_view>(slot_count_);
  view->added = std::exchange(added_, {});
  view->removed = std::exchange(removed_, {});
  if (share) view->share_regions = settings_.region_count();
  const auto regions = static_cast<std::uint64_t>(settings_.region_count());
  for (const auto& [key, how] : tracked_) {
    std::uint64_t total = 0;
    if (share && how.previous) {
      total = 0;  // a sliding window's share is of its current window
    } else if (share) {
      auto& shared = shared_[how.slot];
      if (shared == unshared) {
        // This region may still take an even share of what was left when the partition was seen (of the
        // whole limit for a key first seen since): the others are taken to hold the rest.
        std::uint64_t mine = 0, counted = 0;
        if (how.seen_us < sharing_since_us_) {
          mine = local_counts_[how.slot];
          counted = mine;
          for (const auto& region : remotes_) counted += region->totals[how.slot].total;
        }
        const std::uint64_t left = how.limit - std::min(how.limit, counted);
        const std::uint64_t mine_at_most = mine + left / regions;
        shared = how.limit - std::min(how.limit, mine_at_most);
      }
      total = shared;
    } else {
      for (const auto& region : remotes_) {
        // An unreachable region's last totals count until their window ends (the key is dropped then); a
        // concurrency key's until its leases would have ended.
        if (!region->reachable.value_or(true) && how.lease_us > 0 &&
            now_ms - region->read_ms > how.lease_us / 1000)
          continue;
        total += region->totals[how.slot].total;
      }
    }
    view->totals[how.slot] = total;
  }
  return view;
}

}  // namespace sluice::ratelimit::backends::redis
