#pragma once
// YAML rule files → a compiled rule_set, with upstream's validation and error messages (reference §2).
// Loading is all-or-nothing: the first error fails the whole set and names the file.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ratelimit/config/rule_set.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::config {

struct config_file {
  std::string name;  // the name used in error messages, e.g. "config.basic.yaml"
  std::string content;
  // Where it came from when rules have several sources ("FILE", "GRPC_XDS_SOTW"): rule_set::origin reports
  // it.
  std::string source{};
  bool operator==(const config_file&) const = default;
};

struct load_result {
  std::shared_ptr<const rule_set> rules;  // null on error
  std::string error;                      // "<file>: <what is wrong>" when rules is null
  // Things upstream accepts silently but that are almost certainly mistakes (a key at a level where it means
  // nothing): the load succeeds and these are logged.
  std::vector<std::string> warnings;
};

// Files are loaded in the order given. With merge_domains, several files may add top-level descriptors to one
// domain; otherwise a repeated domain is an error.
// Once loaded, every limit's counters and configuration gauges are made, unless make_stats is false: for
// rules that may yet be refused (they must not change a gauge of the rules in force), which make_rule_stats
// then gives their stats if they come in, before anyone reads them.
// `tables`: the limit tables rules may name in `limits_from` (null: none).
load_result load_rules(std::span<const config_file> files, bool merge_domains, stats::store& stats,
                       bool make_stats = true, table_names* tables = nullptr);
void make_rule_stats(const rule_set& rules, stats::store& stats);

}  // namespace sluice::ratelimit::config
