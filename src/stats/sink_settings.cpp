#include "stats/sink_settings.hpp"

#include <algorithm>
#include <cctype>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "stats/mogrifier.hpp"

namespace sluice::stats {

namespace {

using core::setting;
constexpr setting disable_stats{"DISABLE_STATS", "bool", "false",
                                "no stats sink at all (wins over the others)"};
constexpr setting use_statsd{"USE_STATSD", "bool", "true", "send stats to statsd at STATSD_HOST:STATSD_PORT"};
constexpr setting use_dog_statsd{"USE_DOG_STATSD", "bool", "false",
                                 "send stats to a DogStatsD agent at STATSD_HOST:STATSD_PORT, with tags"};
constexpr setting use_prometheus{"USE_PROMETHEUS", "bool", "false", "serve stats on PROMETHEUS_ADDR"};
constexpr setting mogrifiers{"USE_DOG_STATSD_MOGRIFIERS", "list", "",
                             "DogStatsD mogrifier names, each read from DOG_STATSD_MOGRIFIER_<NAME>_*"};
constexpr setting mogrifier_pattern{"DOG_STATSD_MOGRIFIER_<NAME>_PATTERN", "regular expression", "",
                                    "a mogrifier's pattern over stat names"};
constexpr setting mogrifier_name{"DOG_STATSD_MOGRIFIER_<NAME>_NAME", "text", "",
                                 "a mogrifier's new name, with $1 for the pattern's groups"};
constexpr setting mogrifier_tags{"DOG_STATSD_MOGRIFIER_<NAME>_TAGS", "map", "",
                                 "a mogrifier's tags, k1:$1,k2:$2"};
constexpr setting flush_interval{"STATS_FLUSH_INTERVAL", "duration", "10s",
                                 "how often counters and gauges are sent (positive)"};
constexpr setting max_dynamic_series{"STATS_MAX_DYNAMIC_SERIES", "whole number", "10000",
                                     "the most stats whose names come from requests"};
constexpr setting extra_tags{"EXTRA_TAGS", "map", "", "k1:v1,k2:v2 added to every ratelimit.* stat"};
constexpr setting logging_sink_disabled{"GOSTATS_LOGGING_SINK_DISABLED", "bool", "false",
                                        "the stdout sink writes nothing"};
constexpr setting log_stats{"LOG_STATS", "bool", "false",
                            "the stdout sink writes its lines whatever LOG_LEVEL (else at debug or trace)"};
constexpr setting statsd_host{"STATSD_HOST", "text", "localhost", "statsd / DogStatsD host"};
constexpr setting statsd_port{"STATSD_PORT", "whole number", "8125", "statsd / DogStatsD port"};
constexpr setting statsd_protocol{"STATSD_PROTOCOL", "tcp|tcp4|tcp6|udp|udp4|udp6", "tcp",
                                  "statsd transport (DogStatsD is always UDP)"};
constexpr setting prometheus_addr{"PROMETHEUS_ADDR", "text", ":9090", "Prometheus listen address, Go's form"};
constexpr setting prometheus_path{"PROMETHEUS_PATH", "text", "/metrics", "the scrape path"};
constexpr setting prometheus_mapper{"PROMETHEUS_MAPPER_YAML", "path", "",
                                    "a statsd_exporter mapping file replacing the built-in mapping"};
constexpr setting prometheus_ms{
    "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "bool", "false",
    "the gRPC response time histogram in milliseconds, as upstream's older releases"};
constexpr setting all[]{disable_stats,   use_statsd,         use_dog_statsd,    use_prometheus,
                        mogrifiers,      mogrifier_pattern,  mogrifier_name,    mogrifier_tags,
                        flush_interval,  max_dynamic_series, extra_tags,        logging_sink_disabled,
                        log_stats,       statsd_host,        statsd_port,       statsd_protocol,
                        prometheus_addr, prometheus_path,    prometheus_mapper, prometheus_ms};

// Upstream's runner: DISABLE_STATS wins; DogStatsD, statsd and Prometheus exclude each other (USE_STATSD is
// true by default, so the other two need USE_STATSD=false); none of them means the stdout sink.
sink_kind choose_kind(const core::env_reader& env) {
  bool disabled = env.get_bool(disable_stats);
  bool statsd = env.get_bool(use_statsd);
  bool dogstatsd = env.get_bool(use_dog_statsd);
  bool prometheus = env.get_bool(use_prometheus);
  if (disabled) return sink_kind::none;
  if (int(statsd) + int(dogstatsd) + int(prometheus) > 1) {
    throw core::settings_error(
        "unable to use more than one stats sink at the same time. Set one of USE_DOG_STATSD, USE_STATSD, "
        "USE_PROMETHEUS.");
  }
  if (dogstatsd) return sink_kind::dogstatsd;
  if (statsd) return sink_kind::statsd;
  if (prometheus) return sink_kind::prometheus;
  return sink_kind::stdout_sink;
}

// USE_DOG_STATSD_MOGRIFIERS=A,B and DOG_STATSD_MOGRIFIER_<NAME>_PATTERN/_NAME/_TAGS (NAME upper-cased, as
// envconfig looks it up).
std::vector<mogrifier_settings> read_mogrifiers(const core::env_reader& env) {
  std::vector<mogrifier_settings> out;
  auto list = env.get_string(mogrifiers);
  for (auto listed : core::split(list, ',')) {
    listed = core::trim_space(listed);
    if (listed.empty()) continue;
    mogrifier_settings m;
    m.name = std::string(listed);
    std::ranges::transform(m.name, m.name.begin(), [](unsigned char c) { return std::toupper(c); });
    auto prefix = core::cat("DOG_STATSD_MOGRIFIER_", m.name, "_");
    m.pattern = env.get_string(prefix + "PATTERN", "");
    m.new_name = env.get_string(prefix + "NAME", "");
    m.tags = env.get_map(prefix + "TAGS");
    out.push_back(std::move(m));
  }
  mogrifier_list check(out);  // upstream's start-up errors, now rather than at the first flush
  return out;
}

}  // namespace

std::span<const core::setting> sink_settings_list() {
  return all;
}

sink_settings read_sink_settings(const core::env_reader& env) {
  sink_settings s;
  s.kind = choose_kind(env);

  auto interval = env.get_duration(flush_interval);
  if (interval.count() <= 0) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string(flush_interval),
                  "' for STATS_FLUSH_INTERVAL: expected a positive duration such as 10s"));
  }
  s.flush_interval =
      std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(interval));
  s.max_dynamic_series = env.get_uint(max_dynamic_series, 1, 100'000'000);
  s.extra_tags = env.get_map(extra_tags);
  const auto level = core::ascii_lower(env.get_string(core::log_level_setting));
  s.log_lines = !env.get_bool(logging_sink_disabled) &&
                (env.get_bool(log_stats) || level == "debug" || level == "trace");

  s.statsd_host = env.get_string(statsd_host);
  s.statsd_port = static_cast<std::uint16_t>(env.get_uint(statsd_port, 1, 65535));
  // Go network names; the 4/6 variants are accepted for compatibility, the address family follows the host.
  auto protocol = env.get_choice(statsd_protocol, false);
  s.statsd_udp = protocol.starts_with("udp");
  // Upstream reads the mogrifiers only for the DogStatsD sink.
  if (s.kind == sink_kind::dogstatsd) s.mogrifiers = read_mogrifiers(env);

  s.prometheus_addr = env.get_string(prometheus_addr);
  s.prometheus_path = env.get_string(prometheus_path);
  s.prometheus_mapper_yaml = env.get_string(prometheus_mapper);
  s.prometheus_response_time_as_milliseconds = env.get_bool(prometheus_ms);
  return s;
}

}  // namespace sluice::stats
