#pragma once
// statsd_exporter's mapping language (prometheus/statsd_exporter pkg/mapper), which upstream embeds to turn
// its statsd stat names into Prometheus metrics, so an upstream mapping file works unchanged:
//
//   defaults: {match_type: glob|regex, observer_type: histogram, histogram_options: {buckets: [...]}}
//   mappings:
//     - match: "ratelimit_server.*.response_time"   # glob: each '*' is one whole dot-free part
//       name: "ratelimit_service_response_time_seconds"
//       labels: {grpc_method: "$1"}                 # $n / ${n}: the n-th '*' or regex group
//       observer_type: histogram                    # or the older timer_type
//       histogram_options: {buckets: [0.01, 0.1, 1]}
//       scale: 0.001                                # multiplies every value (ms -> s)
//       match_metric_type: counter|gauge|observer   # only stats of this kind
//       action: map|drop
//       help: "..."
//
// Precedence is statsd_exporter's: the first glob mapping that matches wins; regex mappings (searched, not
// anchored, as Go's FindStringSubmatchIndex) are tried in order only when no glob matches; an unmapped stat
// keeps its own name, escaped. Regexes are RE2, as Go's regexp that statsd_exporter uses: the same syntax and
// leftmost-first matches, in time linear in the name whatever the pattern (names carry request values, and
// std::regex backtracked exponentially on some patterns). Observers are always histograms:
// `summary` is accepted and served as a histogram (a warning says so). `ttl`, `honor_labels`,
// `glob_disable_ordering` and the summary options are accepted and have no effect (Sluice's stats never
// expire and carry no tags of their own).

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::stats {

enum class stat_type { counter, gauge, observer };

// Where one stat goes.
struct prometheus_target {
  bool drop = false;
  std::string name;                                         // a valid metric name
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by label name
  std::string help;                                         // empty unless the mapping gives one
  double scale = 1.0;
  std::shared_ptr<const std::vector<double>> buckets;  // histogram upper bounds, ascending (observers)
};

namespace detail {
struct mapping_rules;
}

class prometheus_mapper {
 public:
  // The text of a mapping file. Throws std::runtime_error saying what is wrong and in which mapping.
  static prometheus_mapper parse(std::string_view yaml);
  // upstream's built-in mapping, with deeper descriptor levels kept as labels
  // (default_prometheus_mapping.yaml); PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS drops the response-time
  // scale, as upstream's flag does.
  static prometheus_mapper builtin(bool response_time_as_milliseconds);
  // PROMETHEUS_MAPPER_YAML. Throws core::settings_error naming the setting, the file and the problem; logs
  // the warnings.
  static prometheus_mapper from_file(const std::string& path);

  prometheus_target map(std::string_view stat, stat_type type) const;
  // Things that load but do not behave as in statsd_exporter (summaries served as histograms).
  const std::vector<std::string>& warnings() const;

 private:
  explicit prometheus_mapper(std::shared_ptr<const detail::mapping_rules> rules) : rules_(std::move(rules)) {}
  std::shared_ptr<const detail::mapping_rules> rules_;
};

// The built-in mapping file's text (generated from default_prometheus_mapping.yaml).
extern const std::string_view default_prometheus_mapping;

}  // namespace sluice::stats
