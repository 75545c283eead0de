// libFuzzer: arbitrary bytes as a Prometheus mapping file (PROMETHEUS_MAPPER_YAML, statsd_exporter's format).
// The input, cut at its last 0xFF byte, is the file and then a stat name. Checks: no crash, no leak, no
// exception but std::runtime_error (with a message); a mapping that loads maps the stat name and a few of
// Sluice's own to valid metrics: a Prometheus metric name unless dropped, label names valid, distinct and
// sorted, a finite scale, and histogram buckets that are finite and increasing.
//
// Build and run: scripts/fuzz prometheus_mapping [seconds]

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "stats/prometheus_mapper.hpp"

namespace {

using namespace sluice::stats;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view own_stats[] = {
    "ratelimit.service.rate_limit.domain.key_value.total_hits",
    "ratelimit.service.rate_limit.domain.key_value.subkey.over_limit",
    "ratelimit_server.ShouldRateLimit.response_time",
    "ratelimit.service.config_load_success",
    "ratelimit.go.totalAlloc",
};

bool name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

bool is_metric_name(std::string_view s) {
  if (s.empty() || !name_char(s[0], true)) return false;
  for (char c : s.substr(1))
    if (!name_char(c, false)) return false;
  return true;
}

bool is_label_name(std::string_view s) {
  return is_metric_name(s) && s.find(':') == std::string_view::npos && !s.starts_with("__");
}

void check_target(const prometheus_target& t) {
  if (t.drop) return;
  check(is_metric_name(t.name));
  for (std::size_t i = 0; i < t.labels.size(); ++i) {
    check(is_label_name(t.labels[i].first) && t.labels[i].first != "le");
    if (i > 0) check(t.labels[i - 1].first < t.labels[i].first);
  }
  check(std::isfinite(t.scale));
  check(t.buckets != nullptr && !t.buckets->empty());
  for (std::size_t i = 0; i < t.buckets->size(); ++i) {
    check(std::isfinite((*t.buckets)[i]));
    if (i > 0) check((*t.buckets)[i - 1] < (*t.buckets)[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto cut = bytes.rfind('\xff');
  const std::string_view file = cut == std::string_view::npos ? bytes : bytes.substr(0, cut);
  const std::optional<std::string_view> stat =
      cut == std::string_view::npos ? std::nullopt : std::optional(bytes.substr(cut + 1));
  std::optional<prometheus_mapper> mapper;
  try {
    mapper.emplace(prometheus_mapper::parse(file));
  } catch (const std::runtime_error& e) {
    check(*e.what() != '\0');
    return 0;
  }
  for (auto type : {stat_type::counter, stat_type::gauge, stat_type::observer}) {
    if (stat) check_target(mapper->map(*stat, type));
    for (auto own : own_stats) check_target(mapper->map(own, type));
  }
  return 0;
}
