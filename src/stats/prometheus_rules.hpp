#pragma once
// The compiled form of a statsd_exporter mapping file, shared by its YAML reader and the matcher.

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stats/prometheus_mapper.hpp"

namespace re2 {
class RE2;
}

namespace sluice::stats::detail {

struct mapping_rule {
  std::size_t number = 0;                 // 1-based position in the file, for messages
  std::vector<std::string> parts;         // glob: the dot-separated parts, "*" for a capture
  std::shared_ptr<const re2::RE2> regex;  // set for a regex rule
  std::optional<stat_type> only;          // match_metric_type
  bool drop = false;
  std::string name;                                         // template with $n
  std::vector<std::pair<std::string, std::string>> labels;  // name -> value template, sorted by name
  std::string help;
  double scale = 1.0;
  std::shared_ptr<const std::vector<double>> buckets;
};

struct mapping_rules {
  std::vector<mapping_rule> globs;    // in file order
  std::vector<mapping_rule> regexes;  // in file order
  std::shared_ptr<const std::vector<double>> default_buckets;
  std::vector<std::string> warnings;
};

// Throws std::runtime_error saying what is wrong and in which mapping.
mapping_rules parse_mapping_yaml(std::string_view yaml);

}  // namespace sluice::stats::detail
