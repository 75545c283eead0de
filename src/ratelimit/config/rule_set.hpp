#pragma once
// The compiled, immutable rate limit rules: one tree of descriptor nodes per domain. Built once per (re)load
// by yaml_loader, then shared read-only by every request through a shared_ptr snapshot.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ratelimit/config/unit.hpp"
#include "stats/store.hpp"

namespace google::protobuf {
class Struct;
}
namespace date {
class time_zone;
}

namespace sluice::ratelimit::config {

// The per-rule counters of upstream: ratelimit.service.rate_limit.<key>.<stat>.
struct rule_stats {
  stats::counter* total_hits = nullptr;
  stats::counter* over_limit = nullptr;
  stats::counter* near_limit = nullptr;
  stats::counter* over_limit_with_local_cache = nullptr;
  stats::counter* within_limit = nullptr;
  stats::counter* shadow_mode = nullptr;
  stats::counter* total_negative_hits = nullptr;  // hits given back (is_negative_hits)
  // algorithm: concurrency only (null otherwise): slots taken, given back, and freed by their leases' end.
  stats::counter* acquired = nullptr;
  stats::counter* released = nullptr;
  stats::counter* expired_leases = nullptr;
  // holder_key only: releases from holders that held nothing (behind Envoy, refused requests' releases).
  stats::counter* unheld_releases = nullptr;

  static rule_stats make(stats::store& store, std::string_view stats_key);
  // "ratelimit.service.rate_limit.<stats key, sanitized>.": what a rule's stats are named under.
  static std::string prefix(std::string_view stats_key);
  // For keys built from request values (detailed_metric, value_to_metric, overrides): bounded by the store's
  // STATS_MAX_DYNAMIC_SERIES, past which they count into `ratelimit.service.rate_limit.<domain>.overflow.*`.
  static rule_stats make_bounded(stats::store& store, std::string_view domain, std::string_view stats_key);
};

// How a limit counts (docs/concepts/algorithms.md). fixed_window is upstream's and the default; concurrency
// limits what is in flight (limiter/leases.hpp).
enum class algorithm : std::uint8_t { fixed_window, sliding_window, gcra, concurrency };

std::string_view algorithm_name(algorithm a);

// What a limit counts (docs/guides/llm-tokens.md). admission is today's and the default; usage
// counts every hit reported, past the limit too (debt), because those hits were already spent.
enum class accounting : std::uint8_t { admission, usage };

// A limit's window in seconds: `multiplier` units; a concurrency limit's "window" is its lease (its unit may
// be left out).
inline std::int64_t window_seconds_of(algorithm a, unit u, std::uint32_t multiplier,
                                      std::int64_t lease_seconds) {
  return a == algorithm::concurrency ? lease_seconds : unit_seconds(u) * multiplier;
}

struct rate_limit {
  std::uint32_t requests_per_unit = 0;
  config::unit unit = unit::unknown;
  std::string name;
  bool unlimited = false;
  std::vector<std::string> replaces;
  // Beyond upstream; the defaults are upstream's behaviour.
  config::algorithm algorithm = algorithm::fixed_window;
  std::uint32_t unit_multiplier = 1;  // windows of this many units
  std::uint32_t burst = 0;            // gcra: admitted at once; 0 means requests_per_unit
  config::accounting accounting = accounting::admission;
  // `time_zone`: windows on that zone's calendar (calendar.hpp); empty and null for upstream's epoch-aligned
  // windows of fixed length.
  std::string time_zone;
  const date::time_zone* zone = nullptr;
  std::int64_t lease_seconds = 600;  // concurrency: `lease`, after which an unreleased slot frees itself
  // concurrency: `holder_key`, the key of the entry that names each acquisition's holder (the descriptor's
  // own key, its last entry; left out of the counter's key); "" for anonymous slots (limiter/leases.hpp).
  std::string holder_key;
  // Empty for a limit counted under upstream's cache key (the only limit of its descriptor, a fixed window of
  // one unit). Otherwise what tells its key and stats apart: "<window>s_<algorithm>" in the key (see
  // limiter/cache_key.hpp), and `stats_suffix` in stats when the descriptor has several limits.
  std::string key_tag;
  std::string stats_suffix;  // "" when the descriptor has a single limit
  rule_stats stats;          // under the node's stats key (+ "." + stats_suffix); unset when unlimited
  std::string stats_key;     // that key (sanitized as the stats name it)

  std::int64_t window_seconds() const {
    return window_seconds_of(algorithm, unit, unit_multiplier, lease_seconds);
  }
};

// GCRA's emission interval in microseconds for `requests` per window of `window_seconds`, rounded up so the
// rate is never above the configured one.
inline std::int64_t gcra_interval_us(std::int64_t window_seconds, std::uint32_t requests) {
  const std::int64_t window_us = window_seconds * 1'000'000;
  const std::int64_t n = std::max<std::int64_t>(1, requests);
  return std::max<std::int64_t>(1, (window_us + n - 1) / n);
}

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class value_regex_set;

// A limit table a rule names in `limits_from` (limit_table.hpp): its number, the same for the process's life
// (what workers find the table and its stats by), and whether it is a Redis hash (LIMIT_TABLES_REDIS) rather
// than a file of LIMIT_TABLES_DIR.
struct table_ref {
  std::uint32_t id = 0;
  bool redis = false;
};

// The tables rules may name, asked while rules load.
class table_names {
 public:
  virtual ~table_names() = default;
  virtual std::optional<table_ref> find(std::string_view name) = 0;
  // Why `name` is not a table, for the load error ("no file x.csv in /etc/tables").
  virtual std::string missing(std::string_view name) const = 0;
  // /rlconfig's lines about the tables.
  virtual std::string dump() const = 0;
};

struct descriptor_node {
  std::string key;
  std::string value;        // as configured; may contain '*'
  std::string value_regex;  // `value_regex` (RE2, the whole value), instead of `value`; "" for none
  std::optional<rate_limit> limit;
  // `rate_limits` after the first (which is `limit`): every one is counted, the status shows the closest.
  std::vector<rate_limit> more_limits;
  std::optional<double> near_limit_ratio;  // overrides NEAR_LIMIT_RATIO for this rule's limits
  bool count_only_admitted = false;        // a request over any of its limits consumes nothing
  bool shadow_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  bool share_threshold = false;
  bool quota_mode = false;
  // `limits_from`: the table whose row for the request's value replaces `limit`; empty and unset for none.
  std::string limits_from;
  std::optional<table_ref> table;
  // `metadata`: merged into the response's dynamic_metadata when the descriptor passes. Null when absent.
  std::shared_ptr<const google::protobuf::Struct> metadata;
  // The config path: "<domain>.<key>[_<value>]..." — the default stats key of this node (value_regex rules:
  // "<key>_<pattern>").
  std::string stats_key;
  // The same as its stats count under, when it differs: a pattern's dots written as stats::level_dot, so
  // that the pattern stays one level of the stat name.
  std::string stat_name_when_other;
  const std::string& stat_name() const {
    return stat_name_when_other.empty() ? stats_key : stat_name_when_other;
  }
  // For wildcard nodes: the composite key "key_value" split at each '*'.
  std::vector<std::string> wildcard_parts;
  // Children by composite key ("key" or "key_value"), and the wildcard children in declaration order.
  std::unordered_map<std::string, std::unique_ptr<descriptor_node>, string_hash, std::equal_to<>> children;
  std::vector<const descriptor_node*> wildcard_children;
  // The value_regex children, in file order (not in `children`: no request value may reach them by name), and
  // per key their nodes with their patterns compiled into one set.
  struct regex_rules {
    std::vector<const descriptor_node*> nodes;  // file order
    std::shared_ptr<const value_regex_set> set;
  };
  std::vector<std::unique_ptr<descriptor_node>> regex_children;
  std::unordered_map<std::string, regex_rules, string_hash, std::equal_to<>> regex_by_key;

  bool is_wildcard() const { return !wildcard_parts.empty(); }
  // The k-th of its limits, as a request's limits are listed: `limit` first, then `more_limits`.
  const rate_limit& limit_at(std::size_t k) const { return k == 0 ? *limit : more_limits[k - 1]; }
  bool has_children() const { return !children.empty() || !regex_children.empty(); }
  // Every child: by name, then the value_regex ones.
  template <typename Visit>
  void for_each_child(Visit&& visit) const {
    for (const auto& [_, child] : children) visit(*child);
    for (const auto& child : regex_children) visit(*child);
  }
};

// One entry of a request descriptor.
struct entry {
  std::string_view key;
  std::string_view value;
};

// How a level of the walk matched a request entry (upstream's order: exact value, wildcard patterns in
// declaration order, value_regex in file order, then the key alone).
enum class matched_by : std::uint8_t { exact, wildcard, regex, key_only };
struct level_match {
  const descriptor_node* node = nullptr;  // null: nothing at this level takes the entry
  matched_by how = matched_by::exact;
};
// One level of the walk: the child of `parent` that `e` lands on. `composite` is scratch space.
level_match match_level(const descriptor_node& parent, const entry& e, std::string& composite);

// The result of matching one request descriptor against a domain.
struct match {
  // The matched node, when it carries a rate_limit; null means no limit applies.
  const descriptor_node* node = nullptr;
  // When some level matched a share_threshold wildcard: per entry, the pattern to put in the cache key
  // instead of the request's value (empty string_view: use the request's value). Empty vector otherwise.
  std::vector<std::string_view> shared_values;
  // Set when the stats key differs from node->stats_key (detailed_metric, value_to_metric).
  std::optional<std::string> stats_key;
};

class rule_set {
 public:
  // The root node of a domain (its children are the top-level descriptors), or null.
  const descriptor_node* find_domain(std::string_view domain) const;
  // upstream's GetLimit walk (reference §3): exact value, then wildcard patterns in order, then key-only
  // default; a limit applies only at the depth of the request's last entry.
  match get_limit(const descriptor_node& domain, std::span<const entry> entries) const;
  // The key of the rule one level below `entries` whose limit is counted per holder (holder_key): what a
  // request names to address that counter without a holder (the counters API). Null when there is none.
  const std::string* holder_key_below(const descriptor_node& domain, std::span<const entry> entries) const;
  // /rlconfig lines: "<key>: unit=<UNIT> requests_per_unit=<n>, shadow_mode: <b>, quota_mode: <b>".
  std::string dump() const;
  std::size_t domain_count() const { return domains_.size(); }
  std::vector<std::string> domain_names() const;
  // Where a domain came from: the sources of its files in load order ("FILE", "GRPC_XDS_SOTW"; empty when the
  // files did not say) and the first file that gave it. Null for a domain not here.
  struct domain_origin {
    std::vector<std::string> sources;
    std::string file;
  };
  const domain_origin* origin(std::string_view domain) const;
  // /rlconfig's "domain=<name> source=<sources>" lines for the domains whose sources are known, by name.
  std::string dump_sources() const;
  // The first domain (by name) both sets have, if any.
  std::optional<std::string> shared_domain(const rule_set& other) const;
  // Two sets without a shared domain as one, sharing their domains' nodes: rules from several sources are
  // combined without loading again the rules of the sources that did not change.
  static std::shared_ptr<const rule_set> union_of(const rule_set& first, const rule_set& second);
  // Every configured limit (unlimited ones too) with its node, for the dashboard; in no particular order.
  void for_each_limit(const std::function<void(std::string_view domain, const descriptor_node&,
                                               const rate_limit&)>& visit) const;

 private:
  friend class rule_set_builder;
  friend void make_rule_stats(const rule_set& rules, stats::store& stats);
  // Shared with the unions made of this set (the nodes do not change once loaded).
  std::unordered_map<std::string, std::shared_ptr<descriptor_node>, string_hash, std::equal_to<>> domains_;
  std::map<std::string, domain_origin, std::less<>> origins_;
};

// A rule's path as the top lists and the dashboard name it: its stats key without "<domain>.".
std::string_view rule_path(const descriptor_node& node, std::string_view domain);

// The stats key of one of a node's limits, as its stats count under: the node's stat_name(), with the limit's
// suffix when it has several.
std::string limit_stats_key(const descriptor_node& node, const rate_limit& limit);

// upstream's wildcardMatch: `parts` is the pattern split at '*'; '*' matches zero or more characters.
bool wildcard_match(std::span<const std::string> parts, std::string_view text);

}  // namespace sluice::ratelimit::config
