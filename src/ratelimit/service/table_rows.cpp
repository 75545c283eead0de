#include "ratelimit/service/table_rows.hpp"

#include "ratelimit/config/limit_options.hpp"

namespace sluice::ratelimit::service {

void apply_table_row(limiter::descriptor_work& item, const config::table_row& row,
                     const config::rate_limit& rule, std::string& tag) {
  if (row.unlimited) {
    item.limits.clear();
    item.unlimited = true;
    return;
  }
  auto& limit = item.limits.front().limit;
  limit.requests_per_unit = row.requests_per_unit;
  if (row.unit == config::unit::unknown || row.unit == rule.unit ||
      rule.algorithm == config::algorithm::concurrency)  // (a concurrency limit has no unit of time)
    return;
  limit.unit = row.unit;
  // The key tag names the window: the row's. Seconds and minutes are alike in every time zone, and a calendar
  // is only for an hour or more: those windows are epoch-aligned.
  config::rate_limit shape;
  shape.algorithm = rule.algorithm;
  shape.unit = row.unit;
  shape.unit_multiplier = rule.unit_multiplier;
  if (row.unit != config::unit::second && row.unit != config::unit::minute) {
    shape.zone = rule.zone;
    shape.time_zone = rule.time_zone;
  }
  limit.zone = shape.zone;
  tag = config::key_tag_of(shape, !rule.stats_suffix.empty());
  limit.key_tag = tag;
}

}  // namespace sluice::ratelimit::service
