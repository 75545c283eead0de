#include "ratelimit/backends/redis/region_reader.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/backends/redis/region_round.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace region_reader_detail {

std::string make_instance_id() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::random_device random;
  return core::cat(host, "-", getpid(), "-", std::to_string(random() % 1'000'000));
}

// Heartbeat fields older than this are deleted by the instances that still write.
std::int64_t stale_field_ms(const region_settings& s) {
  return 10 * std::max(s.max_lag, s.sync_interval).count();
}

}  // namespace region_reader_detail

region_reader::region_reader(const region_settings& settings, std::unique_ptr<rd::store> local,
                             std::vector<std::unique_ptr<rd::store>> remotes,
                             boost::asio::any_io_executor control, const core::clock& clock,
                             stats::store& stats, workers_link workers)
    : settings_(settings),
      local_(std::move(local)),
      clock_(clock),
      stats_(stats),
      workers_(std::move(workers)),
      timer_(control),
      deadline_(std::move(control)),
      instance_(region_reader_detail::make_instance_id()),
      own_heartbeat_(heartbeat_key(settings.key_prefix, settings.region)),
      worst_overshoot_(stats.get_gauge("ratelimit.redis_region.worst_overshoot")),
      sharing_gauge_(stats.get_gauge("ratelimit.redis_region.sharing")),
      keys_gauge_(stats.get_gauge("ratelimit.redis_region.keys")),
      keys_read_gauge_(stats.get_gauge("ratelimit.redis_region.keys_read")) {
  // Names this instance's region in the stats (and so on the dashboard).
  stats.get_gauge(core::cat("ratelimit.redis_region.this_region.", settings.region)).set(1);
  for (std::size_t i = 0; i < remotes.size(); ++i) {
    auto r = std::make_unique<remote>();
    r->name = settings.remotes[i].name;
    r->store = std::move(remotes[i]);
    const auto prefix = core::cat("ratelimit.redis_region.", r->name, ".");
    r->reachable_gauge = &stats.get_gauge(prefix + "reachable");
    r->age_gauge = &stats.get_gauge(prefix + "totals_age_ms");
    r->lag_gauge = &stats.get_gauge(prefix + "replication_lag_ms");
    r->rtt_gauge = &stats.get_gauge(prefix + "round_trip_ms");
    r->last_io_gauge = &stats.get_gauge(prefix + "replica_last_io_seconds");
    remotes_.push_back(std::move(r));
  }
}

region_reader::~region_reader() = default;

void region_reader::start() {
  local_->start([] {});
  for (auto& r : remotes_) r->store->start([] {});
  std::string names;
  for (const auto& r : remotes_) names += core::cat(names.empty() ? "" : ", ", r->name);
  core::log_info("region ", settings_.region, ": remote regions ", names.empty() ? "(none)" : names,
                 " read every ", settings_.sync_interval.count(), "ms (fallback ",
                 settings_.fallback == remote_fallback::share ? "share" : "last", ")");
  schedule();
}

void region_reader::stop() {
  stopped_ = true;
  timer_.cancel();
  deadline_.cancel();
  local_->stop();
  for (auto& r : remotes_) r->store->stop();
}

void region_reader::schedule() {
  if (stopped_) return;
  timer_.expires_after(settings_.sync_interval);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    round();
    schedule();
  });
}

void region_reader::round() {
  if (in_flight_ || stopped_) return;  // the last round's replies are late: this one is skipped
  auto r = std::make_shared<round_state>();
  in_flight_ = r;
  r->workers_left = workers_.count;
  if (r->workers_left == 0) return send_reads(r);
  // The workers' keys come back to the control thread later, maybe after a stop: `alive` tells.
  workers_.collect([this, r, alive = std::weak_ptr<int>(alive_)](regional_backend::new_keys keys) {
    if (alive.expired() || stopped_) return;
    merge(std::move(keys));
    if (--r->workers_left == 0) send_reads(r);
  });
}

// A key tracked for the first time gets a slot (a freed one first); the next view tells the workers.
void region_reader::merge(regional_backend::new_keys keys) {
  const auto now_us = clock_.now_micros();
  for (auto& [key, how] : keys) {
    if (auto it = index_.find(key); it != index_.end()) {
      auto& known = tracked_[it->second];
      known.until_us = std::max(known.until_us, how.until_us);
      local_seen_[known.slot] = std::max(local_seen_[known.slot], how.local);
      continue;
    }
    how.seen_us = now_us;
    if (free_slots_.empty()) {
      how.slot = slot_count_++;
      for (auto& r : remotes_) r->totals.emplace_back();
      tracked_.emplace_back();
      slot_keys_.push_back(nullptr);
      local_counts_.push_back(0);
      local_seen_.push_back(0);
      local_growth_.emplace_back();
      shared_.push_back(unshared);
    } else {
      how.slot = free_slots_.back();
      free_slots_.pop_back();
    }
    local_seen_[how.slot] = how.local;
    const auto slot = how.slot;
    tracked_[slot] = std::move(how);
    auto shared = std::make_shared<const std::string>(key);
    index_.emplace(std::string_view(*shared), slot);
    added_.emplace_back(shared, slot);
    slot_keys_[slot] = std::move(shared);
  }
}

// Keys whose windows ended are dropped, their slots freed (a concurrency key used since the last view stays a
// lease longer).
void region_reader::prune(std::int64_t now_us) {
  for (std::uint32_t slot = 0; slot < slot_count_; ++slot) {
    if (slot_keys_[slot] == nullptr) continue;
    auto& how = tracked_[slot];
    if (how.lease_us > 0 && view_ && slot < view_->totals.size() &&
        view_->used[slot].load(std::memory_order_relaxed))
      how.until_us = std::max(how.until_us, now_us + how.lease_us);
    if (how.until_us >= now_us) continue;
    for (auto& r : remotes_) r->totals[slot] = {};
    local_counts_[slot] = 0;
    local_seen_[slot] = 0;
    local_growth_[slot] = {};
    shared_[slot] = unshared;
    how = {};
    free_slots_.push_back(slot);
    index_.erase(std::string_view(*slot_keys_[slot]));
    removed_.push_back(std::move(slot_keys_[slot]));  // (the workers' maps still point into it)
    slot_keys_[slot] = nullptr;
  }
}

void region_reader::send_reads(const std::shared_ptr<round_state>& r) {
  if (stopped_) return;
  const auto now_us = clock_.now_micros();
  r->started_us = now_us;
  prune(now_us);
  keys_gauge_.set(static_cast<std::int64_t>(index_.size()));
  const bool cold = settings_.cold_interval.count() > 0;
  r->keys.reserve(index_.size());
  for (std::uint32_t slot = 0; slot < slot_count_; ++slot) {
    if (slot_keys_[slot] == nullptr) continue;
    if (cold) gather_local(slot, now_us / 1000);
    if (!cold || !can_wait(tracked_[slot], now_us / 1000))
      r->keys.push_back({slot_keys_[slot].get(), &tracked_[slot]});
  }
  keys_read_gauge_.set(static_cast<std::int64_t>(r->keys.size()));
  order_for_reads(r->keys);  // (tracked_ does not change until the round ends: merge waits for the next)
  r->answers.resize(remotes_.size());
  r->reads_local = settings_.fallback == remote_fallback::share;
  r->regions_left = remotes_.size() + 1;
  write_heartbeat(r);
  for (std::size_t i = 0; i < remotes_.size(); ++i) read_region(i, r);
  // A region that stalls (a replica stopped, not gone) must not hold the others' totals back: at the deadline
  // the round ends without it, and it keeps its last totals (until REDIS_REMOTE_MAX_LAG makes it
  // unreachable).
  deadline_.expires_after(2 * settings_.sync_interval);
  deadline_.async_wait([this, r](boost::system::error_code ec) {
    if (ec || stopped_ || r->finished) return;
    const auto waited_ms = 2 * settings_.sync_interval.count();
    const auto late = core::cat("no reply within ", waited_ms, "ms");
    for (auto& a : r->answers) {
      if (a.answered) continue;
      a.error = late;
      a.round_trip_ms = waited_ms;  // at least: the round trip gauge and the overshoot bound must not take 0
    }
    if (!r->local.answered) r->local.error = late;
    finish(*r);
  });
}

// This region's request: its heartbeat field written, the fields of instances gone for long deleted (those
// the last round found), the hash read back for the next round's deletions, and with `share` this region's
// own counts of the tracked keys.
void region_reader::write_heartbeat(const std::shared_ptr<round_state>& r) {
  const auto now_ms = r->started_us / 1000;
  rd::request req;
  std::size_t at = 0;  // where the heartbeat's HGETALL reply is
  if (!stale_fields_.empty()) {
    std::vector<std::string_view> hdel{"HDEL", own_heartbeat_};
    hdel.insert(hdel.end(), stale_fields_.begin(), stale_fields_.end());
    req.push(hdel);
    ++at;
  }
  std::map<std::string, bool> sees;
  for (const auto& remote : remotes_) sees[remote->name] = remote->reachable.value_or(true);
  req.push({"HSET", own_heartbeat_, instance_, encode_heartbeat(now_ms, sees)});
  req.push({"PEXPIRE", own_heartbeat_, std::to_string(region_reader_detail::stale_field_ms(settings_))});
  req.push({"HGETALL", own_heartbeat_});
  at += 2;
  stale_fields_.clear();
  if (r->reads_local) push_remote_reads(req, own_heartbeat_, r->keys, r->started_us);
  auto pending = std::make_shared<rd::pending_request>();
  pending->expected_replies = req.expected_replies();
  pending->payload = req.release_payload();
  pending->done = [this, r, at, now_ms](boost::system::error_code ec, std::vector<rd::value>&& replies) {
    if (stopped_ || r->finished) return;
    r->local.answered = true;
    if (ec) {
      r->local.error = local_->describe(ec);
    } else if (replies.size() > at) {
      for_each_heartbeat(replies[at], [&](const std::string& instance, std::int64_t ms, const auto&) {
        if (now_ms - ms > region_reader_detail::stale_field_ms(settings_)) stale_fields_.push_back(instance);
      });
      r->local.ok =
          !r->reads_local || read_remote_replies(std::span(replies).subspan(at + 1), r->keys, r->started_us,
                                                 0, r->local.health, r->local.totals, r->local.error);
    }
    if (--r->regions_left == 0) finish(*r);
  };
  local_->exec(std::move(pending), own_heartbeat_);
}

void region_reader::read_region(std::size_t i, const std::shared_ptr<round_state>& r) {
  auto& region = *remotes_[i];
  auto pending = std::make_shared<rd::pending_request>();
  rd::request req;
  push_remote_reads(req, heartbeat_key(settings_.key_prefix, region.name), r->keys, r->started_us);
  pending->expected_replies = req.expected_replies();
  pending->payload = req.release_payload();
  const auto sent = std::chrono::steady_clock::now();
  pending->done = [this, r, i, sent](boost::system::error_code ec, std::vector<rd::value>&& replies) {
    if (stopped_ || r->finished) return;
    auto& a = r->answers[i];
    a.answered = true;
    a.round_trip_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - sent)
            .count();
    if (ec) {
      a.error = remotes_[i]->store->describe(ec);
    } else {
      const auto fresh = r->started_us / 1000 - settings_.max_lag.count();
      a.ok = read_remote_replies(replies, r->keys, r->started_us, fresh, a.health, a.totals, a.error);
    }
    if (--r->regions_left == 0) finish(*r);
  };
  region.store->exec(std::move(pending), {});
}

}  // namespace sluice::ratelimit::backends::redis
