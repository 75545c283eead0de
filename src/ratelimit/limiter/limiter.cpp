#include "ratelimit/limiter/limiter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "ratelimit/limiter/cache_key.hpp"

namespace sluice::ratelimit::limiter {

namespace {

std::uint32_t random_jitter(std::uint32_t max_exclusive) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  return static_cast<std::uint32_t>(rng() % max_exclusive);
}

}  // namespace

limiter::limiter(settings s, const core::clock& clock, jitter_source jitter)
    : settings_(std::move(s)),
      clock_(clock),
      jitter_(jitter ? std::move(jitter) : jitter_source(random_jitter)),
      local_cache_(settings_.local_cache_size_bytes) {}

std::uint64_t limiter::near_threshold(std::uint32_t limit) const {
  // upstream computes this in float32: 15 * 0.8 = 12, 20 * 0.8 = 16.
  float near = static_cast<float>(limit) * static_cast<float>(settings_.near_limit_ratio);
  return static_cast<std::uint64_t>(std::floor(static_cast<double>(near)));
}

void limiter::prepare(work& w) {
  w.now = clock_.now_seconds();
  w.ops.clear();
  bool any_local_hit = false;
  for (auto& item : w.items) {
    if (!item.limit || item.unlimited) continue;
    std::int64_t unit_seconds = config::unit_seconds(item.limit->unit);
    build_cache_key(item.cache_key, settings_.cache_key_prefix, w.domain, item.entries, item.shared_values,
                    window_start(w.now, unit_seconds));
    // A refund goes to the store even for a key the local cache holds: it may bring the key back under.
    if (item.negative) {
      item.limit->stats.total_negative_hits->add(item.hits);
    } else {
      item.limit->stats.total_hits->add(item.hits);
      if (local_cache_.contains(item.cache_key, w.now)) {
        item.over_via_local_cache = true;
        any_local_hit = true;
        continue;
      }
    }
    std::uint32_t jitter =
        settings_.expiration_jitter_max_seconds > 0 ? jitter_(settings_.expiration_jitter_max_seconds) : 0;
    item.op = w.ops.size();
    w.ops.push_back({item.cache_key, item.hits, static_cast<std::uint32_t>(unit_seconds) + jitter,
                     item.limit->unit == config::unit::second, item.negative});
  }
  // STOP mode: a key already known to be over limit means no other key of this request is consumed.
  if (settings_.stop_cache_key_increment_when_overlimit && any_local_hit) {
    for (auto& op : w.ops) {
      if (!op.refund) op.increment = 0;
    }
  }
  w.values.assign(w.ops.size(), 0);
}

bool limiter::wants_precheck(const work& w) const {
  return settings_.stop_cache_key_increment_when_overlimit && !w.ops.empty() &&
         std::ranges::none_of(w.items, [](const descriptor_work& i) { return i.over_via_local_cache; });
}

void limiter::apply_precheck(work& w) {
  bool any_exceeds = false;
  small_vector<bool> exceeds(w.ops.size(), false);
  for (const auto& item : w.items) {
    if (item.op == SIZE_MAX || item.negative) continue;
    exceeds[item.op] = w.values[item.op] + item.hits > item.limit->requests_per_unit;
    any_exceeds = any_exceeds || exceeds[item.op];
  }
  if (any_exceeds) {
    for (std::size_t i = 0; i < w.ops.size(); ++i) {
      if (!exceeds[i] && !w.ops[i].refund) w.ops[i].increment = 0;
    }
  }
  std::ranges::fill(w.values, 0);
}

void limiter::finish(work& w, std::span<response_status*> statuses) {
  using code = envoy::service::ratelimit::v3::RateLimitResponse;
  for (std::size_t i = 0; i < w.items.size(); ++i) {
    auto& item = w.items[i];
    auto& status = *statuses[i];
    if (item.unlimited) {
      status.set_code(code::OK);
      status.set_limit_remaining(std::numeric_limits<std::uint32_t>::max());
      continue;
    }
    if (!item.limit) {
      status.set_code(code::OK);
      continue;
    }
    const auto& limit = *item.limit;
    const auto& stats = limit.stats;
    std::int64_t unit_seconds = config::unit_seconds(limit.unit);
    auto* current = status.mutable_current_limit();
    current->set_requests_per_unit(limit.requests_per_unit);
    current->set_unit(static_cast<code::RateLimit::Unit>(limit.unit));
    if (limit.name != nullptr && !limit.name->empty()) current->set_name(*limit.name);
    status.mutable_duration_until_reset()->set_seconds(seconds_until_reset(w.now, unit_seconds));

    const std::uint64_t h = item.hits;
    const std::uint64_t L = limit.requests_per_unit;
    if (item.negative) {
      // Hits given back never make a descriptor over its limit; the key may now be under it again.
      const std::uint64_t after = w.values[item.op];
      status.set_code(code::OK);
      status.set_limit_remaining(after < L ? static_cast<std::uint32_t>(L - after) : 0);
      if (after < L) local_cache_.erase(item.cache_key);
      continue;
    }
    bool over = false;
    std::uint64_t shadow_hits = h;
    if (item.over_via_local_cache) {
      over = true;
      stats.over_limit->add(h);
      stats.over_limit_with_local_cache->add(h);
    } else {
      const std::uint64_t after = w.values[item.op];
      const std::uint64_t before = after - h;  // may wrap in STOP mode; only affects stats, as upstream
      const std::uint64_t near = near_threshold(limit.requests_per_unit);
      if (after > L) {
        over = true;
        if (before >= L) {
          stats.over_limit->add(h);
        } else {
          stats.over_limit->add(after - L);
          stats.near_limit->add(L - std::max(near, before));
          shadow_hits = after - L;
        }
        local_cache_.insert(item.cache_key, w.now + unit_seconds, w.now);
      } else {
        status.set_limit_remaining(static_cast<std::uint32_t>(L - after));
        stats.within_limit->add(h);
        if (after > near) stats.near_limit->add(before >= near ? h : after - near);
      }
    }
    if (over && limit.shadow_mode) {
      status.set_code(code::OK);
      stats.shadow_mode->add(shadow_hits);
    } else {
      status.set_code(over ? code::OVER_LIMIT : code::OK);
    }
  }
}

}  // namespace sluice::ratelimit::limiter
