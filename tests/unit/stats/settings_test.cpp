#include <doctest/doctest.h>

#include "stats/sink_settings.hpp"
#include "stats/tags.hpp"

using namespace sluice;
using namespace sluice::stats;
using namespace std::chrono_literals;

namespace {

sink_settings read(std::map<std::string, std::string> env) {
  return read_sink_settings(core::env_reader(std::move(env)));
}

// The settings_error's message, or "" when reading succeeds.
std::string error_of(std::map<std::string, std::string> env) {
  try {
    read(std::move(env));
  } catch (const core::settings_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sink settings: upstream's defaults") {
  auto s = read({});
  CHECK(s.kind == sink_kind::statsd);
  CHECK(s.flush_interval == 10s);
  CHECK(s.max_dynamic_series == 10'000);
  CHECK(s.extra_tags.empty());
  CHECK(s.statsd_host == "localhost");
  CHECK(s.statsd_port == 8125);
  CHECK_FALSE(s.statsd_udp);
  CHECK(s.mogrifiers.empty());
  CHECK(s.prometheus_addr == ":9090");
  CHECK(s.prometheus_path == "/metrics");
  CHECK(s.prometheus_mapper_yaml.empty());
  CHECK_FALSE(s.prometheus_response_time_as_milliseconds);
}

TEST_CASE("sink settings: which sink, in upstream's precedence") {
  CHECK(read({{"DISABLE_STATS", "true"}, {"USE_DOG_STATSD", "true"}}).kind == sink_kind::none);
  CHECK(read({{"USE_STATSD", "false"}, {"USE_DOG_STATSD", "true"}}).kind == sink_kind::dogstatsd);
  CHECK(read({{"USE_STATSD", "false"}, {"USE_PROMETHEUS", "true"}}).kind == sink_kind::prometheus);
  CHECK(read({{"USE_STATSD", "false"}}).kind == sink_kind::stdout_sink);
  const std::string conflict =
      "unable to use more than one stats sink at the same time. Set one of USE_DOG_STATSD, USE_STATSD, "
      "USE_PROMETHEUS.";
  // USE_STATSD is true by default.
  CHECK(error_of({{"USE_DOG_STATSD", "true"}}) == conflict);
  CHECK(error_of({{"USE_PROMETHEUS", "true"}}) == conflict);
  CHECK(error_of({{"USE_STATSD", "false"}, {"USE_DOG_STATSD", "true"}, {"USE_PROMETHEUS", "true"}}) ==
        conflict);
}

TEST_CASE("sink settings: values") {
  auto s = read({{"STATSD_HOST", "stats.local"},
                 {"STATSD_PORT", "9125"},
                 {"STATSD_PROTOCOL", "udp6"},
                 {"STATS_FLUSH_INTERVAL", "1.5s"},
                 {"STATS_MAX_DYNAMIC_SERIES", "5"},
                 {"EXTRA_TAGS", "zone:eu.1,app:rl,zone:eu.2"},
                 {"PROMETHEUS_ADDR", "127.0.0.1:9191"},
                 {"PROMETHEUS_PATH", "/m"},
                 {"PROMETHEUS_MAPPER_YAML", "/etc/map.yaml"},
                 {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"}});
  CHECK(s.statsd_host == "stats.local");
  CHECK(s.statsd_port == 9125);
  CHECK(s.statsd_udp);
  CHECK(s.flush_interval == 1500ms);
  CHECK(s.max_dynamic_series == 5);
  // Sorted by key; a repeated key keeps its last value (a Go map).
  CHECK(s.extra_tags == tag_list{{"app", "rl"}, {"zone", "eu.2"}});
  CHECK(s.prometheus_addr == "127.0.0.1:9191");
  CHECK(s.prometheus_path == "/m");
  CHECK(s.prometheus_mapper_yaml == "/etc/map.yaml");
  CHECK(s.prometheus_response_time_as_milliseconds);
  CHECK_FALSE(read({{"STATSD_PROTOCOL", "tcp"}}).statsd_udp);
  CHECK(read({{"STATSD_PROTOCOL", "udp"}}).statsd_udp);
  CHECK(read({{"STATS_FLUSH_INTERVAL", "200ms"}}).flush_interval == 200ms);
}

TEST_CASE("sink settings: every bad value names its variable") {
  const std::pair<const char*, const char*> cases[] = {
      {"USE_STATSD", "yes"},
      {"USE_DOG_STATSD", "on"},
      {"USE_PROMETHEUS", "2"},
      {"DISABLE_STATS", "nope"},
      {"STATSD_PORT", "0"},
      {"STATSD_PORT", "70000"},
      {"STATSD_PROTOCOL", "sctp"},
      {"STATSD_PROTOCOL", "UDP"},
      {"STATS_FLUSH_INTERVAL", "10"},
      {"STATS_FLUSH_INTERVAL", "0"},
      {"STATS_FLUSH_INTERVAL", "-1s"},
      {"STATS_MAX_DYNAMIC_SERIES", "0"},
      {"EXTRA_TAGS", "a"},
      {"EXTRA_TAGS", "a:1,b"},
      {"EXTRA_TAGS", "url:http://x"},
      {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "ms"},
  };
  // CAPTURE names item: clang 14 cannot capture a structured binding in CAPTURE's lambda.
  for (const auto& item : cases) {
    const auto& [name, value] = item;
    CAPTURE(item.first);
    CAPTURE(item.second);
    auto message = error_of({{name, value}});
    CHECK(message.find(name) != std::string::npos);
    CHECK(message.find(value) != std::string::npos);
  }
}

TEST_CASE("sink settings: DogStatsD mogrifiers") {
  std::map<std::string, std::string> env{
      {"USE_STATSD", "false"},
      {"USE_DOG_STATSD", "true"},
      {"USE_DOG_STATSD_MOGRIFIERS", "tag, other"},
      {"DOG_STATSD_MOGRIFIER_TAG_PATTERN", R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$)"},
      {"DOG_STATSD_MOGRIFIER_TAG_NAME", "ratelimit.service.rate_limit.$3"},
      {"DOG_STATSD_MOGRIFIER_TAG_TAGS", "domain:$1,descriptor:$2"},
      {"DOG_STATSD_MOGRIFIER_OTHER_PATTERN", "x"},
      {"DOG_STATSD_MOGRIFIER_OTHER_NAME", "y"},
  };
  auto s = read(env);
  REQUIRE(s.mogrifiers.size() == 2);
  CHECK(s.mogrifiers[0].name == "TAG");
  CHECK(s.mogrifiers[0].new_name == "ratelimit.service.rate_limit.$3");
  CHECK(s.mogrifiers[0].tags == tag_list{{"descriptor", "$2"}, {"domain", "$1"}});
  CHECK(s.mogrifiers[1].name == "OTHER");
  CHECK(s.mogrifiers[1].tags.empty());

  // Only the DogStatsD sink reads them, as upstream.
  auto statsd = env;
  statsd["USE_DOG_STATSD"] = "false";
  statsd["DOG_STATSD_MOGRIFIER_TAG_PATTERN"] = "(";
  CHECK(read(statsd).mogrifiers.empty());

  auto with = [&](const char* name, const char* value) {
    auto e = env;
    e[name] = value;
    return error_of(e);
  };
  CHECK(with("DOG_STATSD_MOGRIFIER_TAG_PATTERN", "").starts_with("no PATTERN specified for mogrifier TAG"));
  CHECK(with("DOG_STATSD_MOGRIFIER_TAG_PATTERN", "").find("DOG_STATSD_MOGRIFIER_TAG_PATTERN") !=
        std::string::npos);
  CHECK(with("DOG_STATSD_MOGRIFIER_TAG_PATTERN", "a(b")
            .starts_with("failed to compile pattern for mogrifier TAG: a(b: "));
  CHECK(with("DOG_STATSD_MOGRIFIER_TAG_NAME", "").starts_with("no NAME specified for mogrifier TAG"));
  CHECK(with("DOG_STATSD_MOGRIFIER_TAG_TAGS", "domain:$1,descriptor:")
            .starts_with("no value specified for tag descriptor for mogrifier TAG"));
  CHECK(
      with("DOG_STATSD_MOGRIFIER_TAG_TAGS", ":5").starts_with("no key specified for tag  for mogrifier TAG"));
  CHECK(with("DOG_STATSD_MOGRIFIER_TAG_TAGS", "domain").find("DOG_STATSD_MOGRIFIER_TAG_TAGS") !=
        std::string::npos);
  CHECK(
      with("USE_DOG_STATSD_MOGRIFIERS", "missing").starts_with("no PATTERN specified for mogrifier MISSING"));
}
