#include "stats/prometheus_mapper.hpp"

#include <re2/re2.h>

#include "core/env.hpp"
#include "core/log.hpp"
#include "core/read_file.hpp"
#include "stats/prometheus_rules.hpp"
#include "stats/prometheus_text.hpp"
#include "stats/store.hpp"

namespace sluice::stats {

namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Go's Regexp.Expand, which statsd_exporter uses: $n or ${n} is capture n (empty when out of range), "$$" is
// '$', a name that is not a number expands to nothing ($1x is ${1x}), a malformed reference stays as text.
std::string expand(std::string_view tmpl, const std::vector<std::string>& captures) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size();) {
    if (tmpl[i] != '$') {
      out.push_back(tmpl[i++]);
      continue;
    }
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '$') {
      out.push_back('$');
      i += 2;
      continue;
    }
    const bool braced = i + 1 < tmpl.size() && tmpl[i + 1] == '{';
    std::size_t start = i + (braced ? 2 : 1), end = start;
    while (end < tmpl.size() && is_word_char(tmpl[end])) ++end;
    if (end == start || (braced && (end >= tmpl.size() || tmpl[end] != '}'))) {
      out.push_back(tmpl[i++]);
      continue;
    }
    std::size_t index = 0;
    if (core::parse_unsigned(tmpl.substr(start, end - start), index) && index < captures.size())
      out.append(captures[index]);
    i = braced ? end + 1 : end;
  }
  return out;
}

prometheus_target make_target(const detail::mapping_rule& rule, const std::vector<std::string>& captures) {
  prometheus_target t;
  t.name = escape_metric_name(expand(rule.name, captures));
  // statsd_exporter drops an event whose mapping yields an empty name.
  t.drop = rule.drop || t.name.empty();
  // A value_regex pattern is one level of the stat name, its dots written as stats::level_dot: the label
  // shows it as configured.
  for (const auto& [label, value] : rule.labels)
    t.labels.emplace_back(label, dots_restored(expand(value, captures)));
  t.help = rule.help;
  t.scale = rule.scale;
  t.buckets = rule.buckets;
  return t;
}

bool glob_match(const detail::mapping_rule& rule, const std::vector<std::string_view>& parts,
                std::vector<std::string>& captures) {
  if (parts.size() != rule.parts.size()) return false;
  captures.assign(1, std::string());  // $0 is empty for a glob, as in statsd_exporter
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (rule.parts[i] == "*") {
      captures.emplace_back(parts[i]);
    } else if (rule.parts[i] != parts[i]) {
      return false;
    }
  }
  return true;
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

}  // namespace

prometheus_mapper prometheus_mapper::parse(std::string_view yaml) {
  return prometheus_mapper(std::make_shared<const detail::mapping_rules>(detail::parse_mapping_yaml(yaml)));
}

prometheus_mapper prometheus_mapper::builtin(bool response_time_as_milliseconds) {
  auto rules = detail::parse_mapping_yaml(default_prometheus_mapping);
  if (response_time_as_milliseconds) {
    for (auto& rule : rules.globs)
      if (rule.name == "ratelimit_service_response_time_seconds") rule.scale = 1.0;
  }
  return prometheus_mapper(std::make_shared<const detail::mapping_rules>(std::move(rules)));
}

prometheus_mapper prometheus_mapper::from_file(const std::string& path) {
  auto text = core::read_file(path);
  if (!text)
    throw core::settings_error(core::cat("PROMETHEUS_MAPPER_YAML: cannot read '", path, "': ", text.error()));
  try {
    auto mapper = parse(*text);
    for (const auto& w : mapper.warnings()) core::log_warn("PROMETHEUS_MAPPER_YAML '", path, "': ", w);
    return mapper;
  } catch (const std::runtime_error& e) {
    throw core::settings_error(
        core::cat("PROMETHEUS_MAPPER_YAML: invalid mapping file '", path, "': ", e.what()));
  }
}

const std::vector<std::string>& prometheus_mapper::warnings() const {
  return rules_->warnings;
}

prometheus_target prometheus_mapper::map(std::string_view stat, stat_type type) const {
  std::vector<std::string> captures;
  if (!rules_->globs.empty()) {
    const auto parts = split_dots(stat);
    for (const auto& rule : rules_->globs) {
      if (rule.only && *rule.only != type) continue;
      if (glob_match(rule, parts, captures)) return make_target(rule, captures);
    }
  }
  for (const auto& rule : rules_->regexes) {
    if (rule.only && *rule.only != type) continue;
    // Searched, not anchored; group 0 is the match. A group that took no part in it is empty.
    std::vector<re2::StringPiece> groups(1 + static_cast<std::size_t>(rule.regex->NumberOfCapturingGroups()));
    if (!rule.regex->Match(re2::StringPiece(stat.data(), stat.size()), 0, stat.size(), re2::RE2::UNANCHORED,
                           groups.data(), static_cast<int>(groups.size())))
      continue;
    captures.clear();
    for (const auto& group : groups) captures.emplace_back(group.data(), group.size());
    return make_target(rule, captures);
  }
  prometheus_target t;
  t.name = escape_metric_name(stat);
  t.drop = t.name.empty();
  t.buckets = rules_->default_buckets;
  return t;
}

}  // namespace sluice::stats
