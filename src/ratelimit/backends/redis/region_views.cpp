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

// A rate in hits per second, smoothed with a time constant of about a second: from `before` to `now` in `ms`.
double region_reader::smoothed_rate(double rate, std::uint64_t now, std::uint64_t before, std::int64_t ms) {
  const double seconds = static_cast<double>(ms) / 1000.0;
  const double grew = now > before ? static_cast<double>(now - before) : 0;
  return rate + std::min(1.0, seconds) * (grew / seconds - rate);
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
      for (std::size_t k = 0; k < r.keys.size(); ++k) {
        auto& last = region.totals[r.keys[k].how->slot];
        remote::key_total now{a.totals[k], 0, now_ms};
        if (last.read_ms > 0 && now_ms > last.read_ms)
          now.rate = smoothed_rate(last.rate, now.total, last.total, now_ms - last.read_ms);
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
  previous_view_ = std::exchange(view_, view);
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
  const bool cold = settings_.cold_interval.count() > 0;
  auto view = std::make_shared<remote_view>(slot_count_, cold);
  view->added = std::exchange(added_, {});
  view->removed = std::exchange(removed_, {});
  if (share) view->share_regions = settings_.region_count();
  const auto regions = static_cast<std::uint64_t>(settings_.region_count());
  for (std::uint32_t slot = 0; slot < slot_count_; ++slot) {
    if (slot_keys_[slot] == nullptr) continue;
    const auto& how = tracked_[slot];
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
          // (A cold key's own count is read only with its totals; the workers' reports may be newer.)
          mine = std::max(local_counts_[how.slot], local_seen_[how.slot]);
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
    if (cold) view->local_seen[how.slot].store(local_seen_[how.slot], std::memory_order_relaxed);
  }
  return view;
}

// REDIS_REMOTE_COLD_INTERVAL: how far this region got with the key in `slot`, the highest count the workers
// reported in the last two views (a worker still on the one before the last wrote there; every write before
// the last collect is in one of them), and how fast it grows.
void region_reader::gather_local(std::uint32_t slot, std::int64_t now_ms) {
  std::uint64_t seen = local_seen_[slot];
  for (const auto* v : {view_.get(), previous_view_.get()}) {
    if (v != nullptr && v->local_seen && slot < v->totals.size())
      seen = std::max(seen, v->local_seen[slot].load(std::memory_order_relaxed));
  }
  auto& local = local_growth_[slot];
  if (local.read_ms > 0 && now_ms > local.read_ms)
    local.rate = smoothed_rate(local.rate, seen, local_seen_[slot], now_ms - local.read_ms);
  local.read_ms = now_ms;
  local_seen_[slot] = seen;
}

// REDIS_REMOTE_COLD_INTERVAL: whether a key can wait for a later round. A fixed or sliding window's current
// counter can, once every region has been read, until REDIS_REMOTE_COLD_INTERVAL has passed since the oldest
// of those reads, while the global count (this region's as reported, one report step more, and the others'
// last totals) at twice the rates last seen stays under its limit until the next round's totals would
// replace what is used now (an interval, the slowest round trip and replication lag).
bool region_reader::can_wait(const tracked_key& how, std::int64_t now_ms) const {
  if (how.kind != remote_kind::counter || how.previous) return false;
  const auto slot = how.slot;
  double total = static_cast<double>(local_seen_[slot] + remote_view::local_step(how.limit));
  double rate = local_growth_[slot].rate;
  std::int64_t oldest = now_ms, delay_ms = 0;
  for (const auto& region : remotes_) {
    const auto& t = region->totals[slot];
    if (t.read_ms == 0) return false;
    oldest = std::min(oldest, t.read_ms);
    total += static_cast<double>(t.total);
    rate += t.rate;
    delay_ms = std::max(
        delay_ms, std::max<std::int64_t>(0, region->read_ms - region->heartbeat_ms) + region->round_trip_ms);
  }
  const auto interval_ms = settings_.sync_interval.count();
  if (now_ms - oldest + interval_ms > settings_.cold_interval.count()) return false;
  const double horizon_s = static_cast<double>(now_ms - oldest + interval_ms + delay_ms) / 1000.0;
  return total + 2 * rate * horizon_s < static_cast<double>(how.limit);
}

}  // namespace sluice::ratelimit::backends::redis
