// The counter operation each limit of a request sends to the store: its key (cache_key.hpp), its window (or a
// calendar's), its TTL and its algorithm's fields (counter_op.hpp).

#include <optional>

#include "ratelimit/config/calendar.hpp"
#include "ratelimit/limiter/cache_key.hpp"
#include "ratelimit/limiter/leases.hpp"
#include "ratelimit/limiter/limiter.hpp"

namespace sluice::ratelimit::limiter {

namespace {

// A concurrency limit's key and operation: one lease per holder (with `holder_key`; the key is the
// descriptor's without its last entry, which names the holder) or leases counted per slice of time.
void describe_leases(counter_op& op, const descriptor_work& item, const key_parts& parts, limit_work& lw) {
  const auto& limit = lw.limit;
  if (limit.per_holder && !item.entries.empty()) {
    key_parts without_holder = parts;
    without_holder.entries = parts.entries.first(parts.entries.size() - 1);
    if (without_holder.shared_values.size() > without_holder.entries.size())
      without_holder.shared_values = parts.shared_values.first(without_holder.entries.size());
    build_tagged_key(lw.cache_key, without_holder, std::nullopt, limit.key_tag);
    holder_op holder{limit.requests_per_unit, limit.lease_seconds * micros_per_second, std::nullopt};
    if (!item.whole_holder_set) holder.holder = item.entries.back().value;
    op.algorithm = holder;
    // The store sets the key's TTL from its latest lease.
    op.ttl_seconds = static_cast<std::uint32_t>(limit.lease_seconds + 1);
    return;
  }
  build_tagged_key(lw.cache_key, parts, std::nullopt, limit.key_tag);
  const auto timing = lease_timing_of(limit.lease_seconds);
  op.algorithm = lease_op{limit.requests_per_unit, timing};
  // The key outlives the newest slice's lease (the store sets it from that slice).
  op.ttl_seconds = static_cast<std::uint32_t>((timing.slices + 2) * timing.slice_us / micros_per_second);
}

}  // namespace

applied_limit applied_limit::of_rule(const config::rate_limit& rule, const config::descriptor_node& node,
                                     config::rule_stats stats) {
  return {rule.requests_per_unit,
          rule.unit,
          &rule.name,
          node.shadow_mode,
          stats,
          rule.algorithm,
          rule.unit_multiplier,
          rule.burst,
          rule.key_tag,
          node.near_limit_ratio.value_or(-1),
          rule.accounting == config::accounting::usage,
          rule.zone,
          rule.lease_seconds,
          !rule.holder_key.empty(),
          rule.stats_key};
}

config::calendar_window limiter::window_of(const applied_limit& limit, std::int64_t now,
                                           calendar_cache* calendars) {
  if (limit.zone != nullptr) {
    if (calendars == nullptr)
      return config::calendar_window_at(*limit.zone, limit.unit, limit.unit_multiplier, now);
    return calendars->at(*limit.zone, limit.unit, limit.unit_multiplier, now);
  }
  const std::int64_t window = limit.window_seconds();
  const std::int64_t start = window_start(now, window);
  return {start, start + window};
}

counter_op limiter::describe_op(const work& w, const descriptor_work& item, const key_parts& parts,
                                limit_work& lw) {
  const auto& limit = lw.limit;
  const auto bounds = window_of(limit, w.now, w.calendars);
  const std::int64_t start = bounds.start;
  const std::int64_t window = bounds.end - bounds.start;
  const bool calendar = limit.zone != nullptr;
  lw.window_end = bounds.end;
  counter_op op;
  op.increment = item.hits;
  op.per_second = limit.unit == config::unit::second;
  op.refund = item.negative;
  op.usage = limit.usage;
  op.now_us = w.now_us;
  // The counter lives until its window ends (a calendar window: from now).
  op.ttl_seconds = static_cast<std::uint32_t>(calendar ? lw.window_end - w.now : window);
  switch (limit.algorithm) {
    case config::algorithm::fixed_window:
      if (limit.key_tag.empty()) {
        build_cache_key(lw.cache_key, parts, start);
      } else {
        build_tagged_key(lw.cache_key, parts, start, limit.key_tag);
      }
      op.algorithm = fixed_window_op{limit.requests_per_unit, lw.window_end};
      break;
    case config::algorithm::sliding_window: {
      build_tagged_key(lw.cache_key, parts, start, limit.key_tag);
      build_tagged_key(lw.previous_key, parts, window_of(limit, start - 1, w.calendars).start, limit.key_tag);
      sliding_window_op sliding{limit.requests_per_unit, lw.window_end, lw.previous_key,
                                window * micros_per_second, 0};
      // It is read as the previous window next.
      if (calendar) {
        sliding.window_start_us = start * micros_per_second;
        op.ttl_seconds = static_cast<std::uint32_t>(
            lw.window_end - w.now + config::longest_calendar_window(limit.unit, limit.unit_multiplier));
      } else {
        op.ttl_seconds = static_cast<std::uint32_t>(2 * window);
      }
      op.algorithm = sliding;
      break;
    }
    case config::algorithm::gcra: {
      build_tagged_key(lw.cache_key, parts, std::nullopt, limit.key_tag);
      const std::int64_t emission_us = config::gcra_interval_us(window, limit.requests_per_unit);
      op.algorithm = gcra_op{emission_us, static_cast<std::int64_t>(limit.gcra_burst()) * emission_us};
      break;
    }
    case config::algorithm::concurrency:
      describe_leases(op, item, parts, lw);
      break;
  }
  op.key = lw.cache_key;
  op.rule = limit.stats_key;
  return op;
}

}  // namespace sluice::ratelimit::limiter
