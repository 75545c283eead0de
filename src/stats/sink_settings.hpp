#pragma once
// Which stats sink runs and how, from upstream's settings (reference ratelimit.md §1.4). At most one sink is
// active; precedence as upstream's runner: DISABLE_STATS, then USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS,
// and the stdout (logging) sink when none is chosen.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/env.hpp"

namespace sluice::stats {

enum class sink_kind { none, statsd, dogstatsd, prometheus, stdout_sink };

struct mogrifier_settings {
  std::string name;      // the NAME in DOG_STATSD_MOGRIFIER_<NAME>_*, as listed in USE_DOG_STATSD_MOGRIFIERS
  std::string pattern;   // _PATTERN: Perl-style regex (Boost.Regex), searched in the stat name as Go does
  std::string new_name;  // _NAME, with $0..$n
  std::vector<std::pair<std::string, std::string>> tags;  // _TAGS: "k:v,k2:v2", values with $0..$n
};

struct sink_settings {
  sink_kind kind = sink_kind::statsd;
  std::chrono::milliseconds flush_interval{10'000};             // STATS_FLUSH_INTERVAL
  std::size_t max_dynamic_series = 10'000;                      // STATS_MAX_DYNAMIC_SERIES (Sluice's own)
  std::vector<std::pair<std::string, std::string>> extra_tags;  // EXTRA_TAGS "k1:v1,k2:v2", sorted by key
  // The stdout sink writes its lines (every stat at every flush) only at LOG_LEVEL=debug or trace, or with
  // LOG_STATS=true, and never with GOSTATS_LOGGING_SINK_DISABLED=true: upstream's default of writing them
  // whatever the level flooded logs (envoyproxy/ratelimit #321, #538, #764).
  bool log_lines = false;

  // statsd and DogStatsD
  std::string statsd_host = "localhost";       // STATSD_HOST
  std::uint16_t statsd_port = 8125;            // STATSD_PORT
  bool statsd_udp = false;                     // STATSD_PROTOCOL: tcp (default) | udp | udp4 | udp6
  std::vector<mogrifier_settings> mogrifiers;  // USE_DOG_STATSD_MOGRIFIERS + DOG_STATSD_MOGRIFIER_<NAME>_*

  // Prometheus
  std::string prometheus_addr = ":9090";     // PROMETHEUS_ADDR, Go form "host:port" or ":port"
  std::string prometheus_path = "/metrics";  // PROMETHEUS_PATH
  std::string prometheus_mapper_yaml;        // PROMETHEUS_MAPPER_YAML: path of a statsd_exporter mapping file
  bool prometheus_response_time_as_milliseconds = false;  // PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS
};

// Throws core::settings_error naming the variable (and the mogrifier) on a bad value, and upstream's
// "unable to use more than one stats sink at the same time" when USE_DOG_STATSD is combined with another.
sink_settings read_sink_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp); DOG_STATSD_MOGRIFIER_<NAME>_* are read by the names listed.
std::span<const core::setting> sink_settings_list();

}  // namespace sluice::stats
