#include "ratelimit/config/limit_options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "core/env.hpp"
#include "core/strings.hpp"
#include "ratelimit/config/calendar.hpp"
#include "ratelimit/config/limit_table.hpp"
#include "ratelimit/config/yaml_fields.hpp"
#include "ratelimit/config/yaml_scalar.hpp"

namespace sluice::ratelimit::config {

namespace {

// Longer windows would overflow the microsecond arithmetic of sliding windows and GCRA.
constexpr std::int64_t max_window_seconds = 3650LL * 86'400;

std::string lower_unit(unit u) {
  return core::ascii_lower(unit_name(u));
}

// `lease`, and what a concurrency limit refuses (it counts what is in flight, with no window).
void load_concurrency_options(const YAML::Node& yaml, rate_limit& limit) {
  const std::string lease = scalar_string(yaml["lease"], "lease");
  limit.holder_key = scalar_string(yaml["holder_key"], "holder_key");
  if (limit.algorithm != algorithm::concurrency) {
    if (!lease.empty()) throw config_error{"lease is only meaningful with algorithm: concurrency"};
    if (yaml["holder_key"])
      throw config_error{
          "holder_key is only meaningful with algorithm: concurrency (it names who holds a slot)"};
    return;
  }
  if (yaml["holder_key"] && limit.holder_key.empty())
    throw config_error{"holder_key: '' names no entry (give the key of the entry that names each holder)"};
  if (!lease.empty()) {
    const auto parsed = core::parse_go_duration(lease);
    if (!parsed || *parsed < std::chrono::seconds{1} || *parsed > std::chrono::hours{24 * 7}) {
      throw config_error{
          core::cat("lease: '", lease, "' is not a duration from 1s to 168h (a Go duration such as 10m)")};
    }
    limit.lease_seconds = std::chrono::duration_cast<std::chrono::seconds>(*parsed).count();
  }
  const char* refused = yaml["unit_multiplier"]                     ? "unit_multiplier"
                        : yaml["burst"]                             ? "burst"
                        : limit.accounting != accounting::admission ? "accounting: usage"
                        : !limit.time_zone.empty()                  ? "time_zone"
                                                                    : nullptr;
  if (refused != nullptr) {
    throw config_error{core::cat("algorithm concurrency takes no ", refused,
                                 " (it limits requests in flight; the lease bounds how long one counts)")};
  }
}

}  // namespace

std::string_view algorithm_name(algorithm a) {
  switch (a) {
    case algorithm::sliding_window:
      return "sliding_window";
    case algorithm::gcra:
      return "gcra";
    case algorithm::concurrency:
      return "concurrency";
    case algorithm::fixed_window:
      break;
  }
  return "fixed_window";
}

void load_limit_options(const YAML::Node& yaml, rate_limit& limit) {
  const std::string name = scalar_string(yaml["algorithm"], "algorithm");
  if (name == "sliding_window") {
    limit.algorithm = algorithm::sliding_window;
  } else if (name == "gcra") {
    limit.algorithm = algorithm::gcra;
  } else if (name == "concurrency") {
    limit.algorithm = algorithm::concurrency;
  } else if (!name.empty() && name != "fixed_window") {
    throw config_error{core::cat("unknown algorithm '", name,
                                 "' (expected fixed_window, sliding_window, gcra or concurrency)")};
  }
  if (const auto& m = yaml["unit_multiplier"]; m && !m.IsNull()) {
    limit.unit_multiplier = scalar_uint32(m, "unit_multiplier");
    if (limit.unit_multiplier == 0) throw config_error{"unit_multiplier must be at least 1"};
  }
  if (const auto& b = yaml["burst"]; b && !b.IsNull()) {
    if (limit.algorithm != algorithm::gcra)
      throw config_error{"burst is only meaningful with algorithm: gcra"};
    limit.burst = scalar_uint32(b, "burst");
    if (limit.burst == 0) throw config_error{"burst must be at least 1"};
  }
  const std::string accounting = scalar_string(yaml["accounting"], "accounting");
  if (accounting == "usage") {
    limit.accounting = accounting::usage;
  } else if (!accounting.empty() && accounting != "admission") {
    throw config_error{core::cat("unknown accounting '", accounting, "' (expected admission or usage)")};
  }
  limit.time_zone = scalar_string(yaml["time_zone"], "time_zone");
  // `time_zone: ""` would silently mean UTC windows; a zone left out says that.
  if (const auto& z = yaml["time_zone"]; z && z.IsScalar() && z.Scalar().empty()) {
    throw config_error{
        "time_zone is empty: name an IANA zone (such as Europe/Berlin), or leave time_zone out for windows "
        "aligned to the Unix epoch"};
  }
  load_concurrency_options(yaml, limit);
  if (!limit.time_zone.empty() && (limit.unit == unit::second || limit.unit == unit::minute)) {
    throw config_error{core::cat("time_zone is for units of an hour or more: a ", lower_unit(limit.unit),
                                 " is the same in every zone")};
  }
  if (!limit.time_zone.empty() && limit.algorithm == algorithm::gcra) {
    throw config_error{
        "time_zone is for fixed_window and sliding_window: a GCRA bucket refills continuously and has no "
        "calendar"};
  }
  if (limit.unlimited) {
    if (limit.algorithm != algorithm::fixed_window || limit.unit_multiplier != 1 ||
        limit.accounting != accounting::admission || !limit.time_zone.empty())
      throw config_error{
          "an unlimited rate_limit takes no algorithm, unit_multiplier, accounting or time_zone"};
    return;
  }
  if (limit.window_seconds() > max_window_seconds) {
    throw config_error{core::cat("unit_multiplier: a window of ", limit.unit_multiplier, " ",
                                 lower_unit(limit.unit), " is longer than 3650 days")};
  }
  if (limit.algorithm == algorithm::gcra && limit.requests_per_unit == 0)
    throw config_error{"algorithm gcra needs requests_per_unit of at least 1"};
  if (limit.algorithm == algorithm::gcra && limit.burst != 0) {
    // A bucket longer than the longest window could push an arrival time past what the arithmetic holds.
    const std::int64_t interval_us = gcra_interval_us(limit.window_seconds(), limit.requests_per_unit);
    if (limit.burst > max_window_seconds * 1'000'000 / interval_us)
      throw config_error{core::cat("burst: ", limit.burst, " requests at one per ",
                                   interval_us >= 1'000'000 ? interval_us / 1'000'000 : interval_us / 1000,
                                   interval_us >= 1'000'000 ? " s" : " ms", " take longer than 3650 days")};
  }
}

void load_rule_options(const YAML::Node& yaml, descriptor_node& node) {
  node.count_only_admitted = scalar_bool(yaml["count_only_admitted"], "count_only_admitted");
  node.limits_from = scalar_string(yaml["limits_from"], "limits_from");
  if (const auto& r = yaml["near_limit_ratio"]; r && !r.IsNull()) {
    auto ratio = r.IsScalar() ? parse_yaml_number(r) : std::nullopt;
    if (!ratio || *ratio < 0 || *ratio > 1) {
      throw config_error{
          core::cat("near_limit_ratio: '", r.IsScalar() ? r.Scalar() : "", "' is not a number from 0 to 1")};
    }
    node.near_limit_ratio = *ratio;
  }
}

// `limits_from`: the table is found and the rule can take its rows.
void find_table(descriptor_node& node, table_names* tables) {
  const auto& name = node.limits_from;
  const auto refuse = [&](std::string_view why) {
    throw config_error{core::cat("rule '", node.stats_key, "': limits_from '", name, "': ", why)};
  };
  if (!is_table_name(name))
    refuse("a table name is made of letters, digits, '_', '-' and '.' and does not start with '.'");
  if (!node.limit) refuse("needs a rate_limit, the limit of the values the table does not list");
  if (node.limit->unlimited)
    refuse("the rate_limit must have a unit (rows without one use it), not unlimited");
  if (!node.more_limits.empty()) refuse("a table row replaces the one rate_limit; rate_limits has several");
  if (tables == nullptr) refuse("no limit tables are set up (LIMIT_TABLES_DIR or LIMIT_TABLES_REDIS)");
  node.table = tables->find(name);
  if (!node.table) refuse(tables->missing(name));
}

void finish_limits(descriptor_node& node, table_names* tables) {
  if (!node.limits_from.empty()) find_table(node, tables);
  if (!node.limit) {
    if (node.near_limit_ratio) throw config_error{"near_limit_ratio needs a rate_limit or rate_limits"};
    return;
  }
  const auto usage = [](const rate_limit& l) { return l.accounting == accounting::usage; };
  const auto concurrency = [](const rate_limit& l) { return l.algorithm == algorithm::concurrency; };
  if (node.count_only_admitted &&
      (concurrency(*node.limit) || std::ranges::any_of(node.more_limits, concurrency))) {
    throw config_error{
        core::cat("rule '", node.stats_key,
                  "': count_only_admitted cannot hold back a concurrency limit (a slot is taken or "
                  "not on its own); choose one")};
  }
  if (node.count_only_admitted && (usage(*node.limit) || std::ranges::any_of(node.more_limits, usage))) {
    throw config_error{
        core::cat("rule '", node.stats_key,
                  "': count_only_admitted counts only admitted requests, but accounting: usage "
                  "counts every hit reported; choose one")};
  }
  const bool several = !node.more_limits.empty();
  std::set<std::string> tags, suffixes;
  auto finish = [&](rate_limit& l) {
    if (l.unlimited) return;
    if (!l.holder_key.empty() && l.holder_key != node.key) {
      throw config_error{core::cat("rule '", node.stats_key, "': holder_key '", l.holder_key,
                                   "' must name this descriptor's own key '", node.key,
                                   "' (the request's last entry names the holder; the counter is the "
                                   "descriptor's without it)")};
    }
    if (!l.holder_key.empty() && (node.detailed_metric || node.value_to_metric)) {
      throw config_error{core::cat("rule '", node.stats_key, "': holder_key with ",
                                   node.detailed_metric ? "detailed_metric" : "value_to_metric",
                                   " would name a stat after every holder's id; leave it out")};
    }
    if (!l.holder_key.empty() && !node.limits_from.empty()) {
      throw config_error{core::cat("rule '", node.stats_key,
                                   "': holder_key and limits_from both read the last entry's value; a "
                                   "holder's id names no table row")};
    }
    if (!l.time_zone.empty()) {
      try {
        l.zone = find_time_zone(l.time_zone);
      } catch (const std::exception& e) {
        throw config_error{core::cat("rule '", node.stats_key, "': unknown time_zone '", l.time_zone,
                                     "' (an IANA zone name such as Europe/Berlin): ", e.what())};
      }
    }
    l.key_tag = key_tag_of(l, several);
    auto algo = algorithm_name(l.algorithm);
    algo = algo.substr(0, algo.find('_'));  // fixed, sliding, gcra
    if (several) {
      l.stats_suffix = !l.name.empty()                         ? l.name
                       : l.algorithm == algorithm::concurrency ? std::string("concurrency")
                       : l.unit_multiplier == 1                ? lower_unit(l.unit)
                                                : core::cat(l.unit_multiplier, "_", lower_unit(l.unit));
      if (l.name.empty() && l.algorithm != algorithm::fixed_window && l.algorithm != algorithm::concurrency)
        l.stats_suffix += core::cat("_", algo);
      if (!suffixes.insert(l.stats_suffix).second) {
        throw config_error{core::cat("rate_limits of '", node.stats_key, "': two limits are named '",
                                     l.stats_suffix, "' in stats (give one a different name)")};
      }
      if (!tags.insert(l.key_tag).second) {
        throw config_error{core::cat("rate_limits of '", node.stats_key, "': two limits count the same ",
                                     l.window_seconds(), "-second window with ", algorithm_name(l.algorithm),
                                     " (only the lower one could ever apply)")};
      }
    }
  };
  finish(*node.limit);
  for (auto& l : node.more_limits) finish(l);
}

std::string key_tag_of(const rate_limit& l, bool several) {
  const bool upstream_key =
      !several && l.algorithm == algorithm::fixed_window && l.unit_multiplier == 1 && l.zone == nullptr;
  auto algo = algorithm_name(l.algorithm);
  algo = algo.substr(0, algo.find('_'));  // fixed, sliding, gcra
  // One key for all time, as GCRA's; per holder another name (and another type of key in Redis: a rule that
  // gains holder_key never reads the slices' HASH).
  if (l.algorithm == algorithm::concurrency)
    return core::cat(l.lease_seconds, "s_concurrency", l.holder_key.empty() ? "" : "_holders");
  // A calendar window: its key carries the window's start (as upstream's) and this tag.
  if (l.zone != nullptr) {
    return core::cat(l.unit_multiplier == 1 ? "" : core::cat(l.unit_multiplier), lower_unit(l.unit), "_",
                     l.time_zone, "_", algo);
  }
  return upstream_key ? std::string() : core::cat(l.window_seconds(), "s_", algo);
}

void bind_stats(descriptor_node& node, stats::store& stats) {
  auto bind = [&](rate_limit& l) {
    if (l.unlimited) return;
    const std::string key = limit_stats_key(node, l);
    l.stats = rule_stats::make(stats, key);
    l.stats_key = key;
    if (l.algorithm == algorithm::concurrency) {
      const std::string at = rule_stats::prefix(key);
      l.stats.acquired = &stats.get_counter(at + "acquired");
      l.stats.released = &stats.get_counter(at + "released");
      l.stats.expired_leases = &stats.get_counter(at + "expired_leases");
      if (!l.holder_key.empty()) l.stats.unheld_releases = &stats.get_counter(at + "unheld_releases");
    }
    // What a dashboard needs to show utilisation: total_hits per window against these.
    const std::string prefix = rule_stats::prefix(key);
    stats.get_gauge(prefix + "limit").set(l.requests_per_unit);
    stats.get_gauge(prefix + "window_seconds").set(l.window_seconds());
  };
  if (node.limit) bind(*node.limit);
  for (auto& l : node.more_limits) bind(l);
  for (auto& [_, child] : node.children) bind_stats(*child, stats);
  for (auto& child : node.regex_children) bind_stats(*child, stats);
}

std::string describe_options(const rate_limit& l) {
  std::string out;
  if (l.algorithm != algorithm::fixed_window) out += core::cat(", algorithm: ", algorithm_name(l.algorithm));
  if (l.unit_multiplier != 1) out += core::cat(", unit_multiplier: ", l.unit_multiplier);
  if (l.burst != 0) out += core::cat(", burst: ", l.burst);
  if (l.accounting == accounting::usage) out += ", accounting: usage";
  if (!l.time_zone.empty()) out += core::cat(", time_zone: ", l.time_zone);
  if (l.algorithm == algorithm::concurrency) out += core::cat(", lease: ", l.lease_seconds, "s");
  if (!l.holder_key.empty()) out += core::cat(", holder_key: ", l.holder_key);
  return out;
}

}  // namespace sluice::ratelimit::config
