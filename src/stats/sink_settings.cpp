#include "stats/sink_settings.hpp"

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "stats/mogrifier.hpp"

namespace sluice::stats {

namespace {

// Upstream's runner: DISABLE_STATS wins; DogStatsD, statsd and Prometheus exclude each other (USE_STATSD is
// true by default, so the other two need USE_STATSD=false); none of them means the stdout sink.
sink_kind choose_kind(const core::env_reader& env) {
  bool disabled = env.get_bool("DISABLE_STATS", false);
  bool statsd = env.get_bool("USE_STATSD", true);
  bool dogstatsd = env.get_bool("USE_DOG_STATSD", false);
  bool prometheus = env.get_bool("USE_PROMETHEUS", false);
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
  auto list = env.get_string("USE_DOG_STATSD_MOGRIFIERS", "");
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

sink_settings read_sink_settings(const core::env_reader& env) {
  sink_settings s;
  s.kind = choose_kind(env);

  auto interval = env.get_duration("STATS_FLUSH_INTERVAL", s.flush_interval);
  if (interval.count() <= 0) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string("STATS_FLUSH_INTERVAL", ""),
                  "' for STATS_FLUSH_INTERVAL: expected a positive duration such as 10s"));
  }
  s.flush_interval =
      std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(interval));
  s.max_dynamic_series = env.get_uint("STATS_MAX_DYNAMIC_SERIES", s.max_dynamic_series, 1, 100'000'000);
  s.extra_tags = env.get_map("EXTRA_TAGS");
  const auto level = core::ascii_lower(env.get_string("LOG_LEVEL", "warn"));
  s.log_lines = !env.get_bool("GOSTATS_LOGGING_SINK_DISABLED", false) &&
                (env.get_bool("LOG_STATS", false) || level == "debug" || level == "trace");

  s.statsd_host = env.get_string("STATSD_HOST", s.statsd_host);
  s.statsd_port = static_cast<std::uint16_t>(env.get_uint("STATSD_PORT", s.statsd_port, 1, 65535));
  // Go network names; the 4/6 variants are accepted for compatibility, the address family follows the host.
  auto protocol =
      env.get_choice("STATSD_PROTOCOL", "tcp", {"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"}, false);
  s.statsd_udp = protocol.starts_with("udp");
  // Upstream reads the mogrifiers only for the DogStatsD sink.
  if (s.kind == sink_kind::dogstatsd) s.mogrifiers = read_mogrifiers(env);

  s.prometheus_addr = env.get_string("PROMETHEUS_ADDR", s.prometheus_addr);
  s.prometheus_path = env.get_string("PROMETHEUS_PATH", s.prometheus_path);
  s.prometheus_mapper_yaml = env.get_string("PROMETHEUS_MAPPER_YAML", "");
  s.prometheus_response_time_as_milliseconds =
      env.get_bool("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", s.prometheus_response_time_as_milliseconds);
  return s;
}

}  // namespace sluice::stats
