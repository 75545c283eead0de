// Reads a statsd_exporter mapping file into rules, checking what statsd_exporter checks (and typos: unknown
// keys are errors here, so a misspelt option is not silently ignored).

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include "core/strings.hpp"
#include "stats/prometheus_rules.hpp"

namespace sluice::stats::detail {

namespace {

[[noreturn]] void fail(const std::string& where, std::string_view what) {
  throw std::runtime_error(where.empty() ? std::string(what) : core::cat(where, ": ", what));
}

void check_keys(const YAML::Node& node, std::initializer_list<std::string_view> known,
                const std::string& where) {
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(where, core::cat("unknown key '", key, "'"));
  }
}

std::string text(const YAML::Node& node, const std::string& where, std::string_view key) {
  if (!node.IsScalar()) fail(where, core::cat("'", key, "' must be a string"));
  return node.Scalar();
}

std::string choice(const YAML::Node& node, const std::string& where, std::string_view key,
                   std::initializer_list<std::string_view> allowed) {
  std::string value = text(node, where, key);
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    std::string list;
    for (auto a : allowed) list += core::cat(list.empty() ? "" : ", ", a);
    fail(where, core::cat("'", key, "' is '", value, "'; expected one of ", list));
  }
  return value;
}

double number(const YAML::Node& node, const std::string& where, std::string_view key) {
  double v = 0;
  if (!node.IsScalar() || !YAML::convert<double>::decode(node, v) || !std::isfinite(v))
    fail(where, core::cat("'", key, "' must be a finite number"));
  return v;
}

std::shared_ptr<const std::vector<double>> buckets(const YAML::Node& node, const std::string& where) {
  if (!node.IsSequence() || node.size() == 0) fail(where, "'buckets' must be a non-empty list of numbers");
  std::vector<double> out;
  for (const auto& b : node) out.push_back(number(b, where, "buckets"));
  if (std::adjacent_find(out.begin(), out.end(), std::greater_equal<>()) != out.end())
    fail(where, "'buckets' must be in increasing order");
  return std::make_shared<const std::vector<double>>(std::move(out));
}

// histogram_options.buckets, or the older top-level `buckets`; null when neither is given.
std::shared_ptr<const std::vector<double>> histogram_buckets(const YAML::Node& node,
                                                             const std::string& where) {
  const YAML::Node options = node["histogram_options"];
  const YAML::Node legacy = node["buckets"];
  if (options) {
    if (!options.IsMap()) fail(where, "'histogram_options' must be a map");
    check_keys(options, {"buckets", "native_histogram_bucket_factor", "native_histogram_max_buckets"}, where);
    if (options["buckets"] && legacy) fail(where, "buckets given both in 'histogram_options' and at the top");
    if (options["buckets"]) return buckets(options["buckets"], where);
  }
  return legacy ? buckets(legacy, where) : nullptr;
}

// observer_type, or the older timer_type; "" when neither is given.
std::string observer_type(const YAML::Node& node, const std::string& where) {
  for (const char* key : {"observer_type", "timer_type"})
    if (node[key]) return choice(node[key], where, key, {"histogram", "summary"});
  return "";
}

bool is_label_name(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// statsd_exporter's metricNameRE: name characters and $n / ${n} references, not starting with a digit.
bool is_name_template(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] != '$') {
      if (!is_label_name(s.substr(i, 1)) && !(s[i] >= '0' && s[i] <= '9')) return false;
      ++i;
      continue;
    }
    const bool braced = i + 1 < s.size() && s[i + 1] == '{';
    std::size_t j = i + (braced ? 2 : 1), digits = j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == digits) return false;
    if (braced && (j >= s.size() || s[j] != '}')) return false;
    i = braced ? j + 1 : j;
  }
  return true;
}

std::vector<std::string> glob_parts(const std::string& match, const std::string& where) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = match.find('.', start);
    std::string part = match.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) fail(where, "a glob match cannot have an empty part");
    if (part != "*" && part.find('*') != std::string::npos)
      fail(where, "in a glob match '*' stands for one whole dot-separated part (use match_type: regex)");
    parts.push_back(std::move(part));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

struct defaults {
  std::string match_type = "glob";
};

mapping_rule read_rule(const YAML::Node& node, std::size_t position, const defaults& d,
                       mapping_rules& rules) {
  std::string where = core::cat("mapping #", position);
  if (!node.IsMap()) fail(where, "must be a map");
  if (!node["match"]) fail(where, "'match' is missing");
  const std::string match = text(node["match"], where, "match");
  if (match.empty()) fail(where, "'match' is empty");
  where = core::cat(where, " (match '", match, "')");
  check_keys(
      node,
      {"match", "name", "labels", "observer_type", "timer_type", "buckets", "quantiles", "match_type", "help",
       "action", "match_metric_type", "ttl", "summary_options", "histogram_options", "scale", "honor_labels"},
      where);

  mapping_rule rule;
  rule.number = position;
  const std::string match_type =
      node["match_type"] ? choice(node["match_type"], where, "match_type", {"glob", "regex"}) : d.match_type;
  if (match_type == "glob") {
    rule.parts = glob_parts(match, where);
  } else {
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto regex = std::make_shared<const re2::RE2>(match, options);
    if (!regex->ok()) fail(where, core::cat("invalid regex: ", regex->error()));
    rule.regex = std::move(regex);
  }
  if (node["action"]) rule.drop = choice(node["action"], where, "action", {"map", "drop"}) == "drop";
  if (node["name"]) rule.name = text(node["name"], where, "name");
  if (rule.name.empty() && !rule.drop) fail(where, "'name' is missing");
  if (!rule.name.empty() && !is_name_template(rule.name))
    fail(where, core::cat("'name' '", rule.name, "' is not a metric name (letters, digits, '_', $n)"));
  if (const YAML::Node labels = node["labels"]) {
    if (!labels.IsMap()) fail(where, "'labels' must be a map");
    for (const auto& entry : labels) {
      const std::string label = entry.first.Scalar();
      if (!is_label_name(label) || label.starts_with("__"))
        fail(where, core::cat("'", label, "' is not a label name"));
      if (label == "le") fail(where, "label 'le' is reserved for histogram buckets");
      rule.labels.emplace_back(label, text(entry.second, where, "labels"));
    }
    std::ranges::sort(rule.labels);
    // yaml-cpp keeps a repeated key; a series with the same label twice would break the whole scrape.
    const auto twice =
        std::ranges::adjacent_find(rule.labels, {}, &std::pair<std::string, std::string>::first);
    if (twice != rule.labels.end()) fail(where, core::cat("label '", twice->first, "' is given twice"));
  }
  if (node["match_metric_type"]) {
    const auto t =
        choice(node["match_metric_type"], where, "match_metric_type", {"counter", "gauge", "observer"});
    rule.only = t == "counter" ? stat_type::counter : t == "gauge" ? stat_type::gauge : stat_type::observer;
  }
  if (node["help"]) rule.help = text(node["help"], where, "help");
  if (node["scale"]) rule.scale = number(node["scale"], where, "scale");
  if (observer_type(node, where) == "summary")
    rules.warnings.push_back(core::cat(where, ": observer_type summary is served as a histogram"));
  rule.buckets = histogram_buckets(node, where);
  if (!rule.buckets) rule.buckets = rules.default_buckets;
  return rule;
}

}  // namespace

mapping_rules parse_mapping_yaml(std::string_view yaml) {
  YAML::Node loaded;
  try {
    loaded = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    fail(core::cat("line ", e.mark.line + 1), e.msg);
  }
  const YAML::Node& root = loaded;  // const: looking a key up must not add it
  mapping_rules rules;
  // Prometheus' client default buckets, which statsd_exporter uses unless told otherwise.
  rules.default_buckets = std::make_shared<const std::vector<double>>(
      std::vector{.005, .01, .025, .05, .1, .25, .5, 1.0, 2.5, 5.0, 10.0});
  if (root.IsNull()) return rules;
  if (!root.IsMap()) fail("", "the file must be a map with 'mappings' (and 'defaults')");
  check_keys(root, {"defaults", "mappings"}, "");

  defaults d;
  if (const YAML::Node node = root["defaults"]) {
    if (!node.IsMap()) fail("defaults", "must be a map");
    check_keys(node,
               {"match_type", "observer_type", "timer_type", "buckets", "quantiles", "histogram_options",
                "summary_options", "glob_disable_ordering", "ttl"},
               "defaults");
    if (node["match_type"])
      d.match_type = choice(node["match_type"], "defaults", "match_type", {"glob", "regex"});
    if (observer_type(node, "defaults") == "summary")
      rules.warnings.push_back("defaults: observer_type summary is served as a histogram");
    if (auto b = histogram_buckets(node, "defaults")) rules.default_buckets = std::move(b);
  }
  if (const YAML::Node mappings = root["mappings"]) {
    if (!mappings.IsSequence()) fail("mappings", "must be a list");
    std::size_t position = 0;
    for (const auto& node : mappings) {
      mapping_rule rule = read_rule(node, ++position, d, rules);
      (rule.regex ? rules.regexes : rules.globs).push_back(std::move(rule));
    }
  }
  return rules;
}

}  // namespace sluice::stats::detail
