#pragma once
// The rule keys Sluice adds to upstream's (docs/reference/rules.md#the-keys-sluice-adds): per limit
// `algorithm`, `unit_multiplier`, `burst`, `accounting`, `time_zone`, `lease` and `holder_key`; per
// descriptor `rate_limits` (several limits), `near_limit_ratio` and `count_only_admitted`. Every one is
// optional and its default is upstream's behaviour. Errors are thrown as config_error with the message
// check-config prints.

#include <span>
#include <string>
#include <string_view>

#include "ratelimit/config/rule_set.hpp"
#include "stats/store.hpp"

namespace YAML {
class Node;
}

namespace sluice::ratelimit::config {

// The keys a rate_limit mapping (or an entry of rate_limits) may have besides upstream's.
inline constexpr std::string_view limit_option_keys[] = {
    "algorithm", "unit_multiplier", "burst", "accounting", "time_zone", "lease", "holder_key"};
// The descriptor keys added to upstream's.
inline constexpr std::string_view rule_option_keys[] = {"rate_limits", "near_limit_ratio",
                                                        "count_only_admitted"};

// Reads `algorithm`, `unit_multiplier`, `burst`, `accounting`, `time_zone`, `lease` and `holder_key` of one
// limit whose
// unit and requests_per_unit are read.
void load_limit_options(const YAML::Node& yaml, rate_limit& limit);
// Reads `near_limit_ratio`, `count_only_admitted` and `limits_from` of a descriptor.
void load_rule_options(const YAML::Node& yaml, descriptor_node& node);
// Once every limit of `node` is loaded: finds their time zones, gives each its key tag and stats suffix
// (refusing two limits that would share a counter or a stats name), and finds its `limits_from` table in
// `tables` (null: no table may be named).
void finish_limits(descriptor_node& node, table_names* tables);
// What tells a limit's counter apart from upstream's (rate_limit::key_tag): "" for upstream's key (the only
// limit of its descriptor, a fixed window of one unit, no time zone).
std::string key_tag_of(const rate_limit& limit, bool several);
// Once the whole rule set has loaded: makes the counters and configuration gauges of every limit in the tree.
// Not before, so rules that are refused leave no stats behind (nor change a gauge of the rules in use).
void bind_stats(descriptor_node& node, stats::store& stats);
// ", algorithm: gcra, unit_multiplier: 5, burst: 20, accounting: usage" for /rlconfig ("" for upstream's
// defaults).
std::string describe_options(const rate_limit& limit);

}  // namespace sluice::ratelimit::config
