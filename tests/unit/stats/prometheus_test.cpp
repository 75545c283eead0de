#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "core/env.hpp"
#include "core/strings.hpp"
#include "stats/prometheus_exporter.hpp"
#include "stats/prometheus_mapper.hpp"
#include "stats/prometheus_setup.hpp"
#include "stats/prometheus_text.hpp"

using namespace sluice;
using namespace sluice::stats;

namespace {

using labels = std::vector<std::pair<std::string, std::string>>;

std::string label_value(std::string_view v) {
  std::string out;
  append_label_value(out, v);
  return out;
}

std::string number(double v) {
  std::string out;
  append_number(out, v);
  return out;
}

std::string parse_error(std::string_view yaml) {
  try {
    prometheus_mapper::parse(yaml);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("prometheus text: statsd_exporter's name escaping, label and number formats") {
  CHECK(escape_metric_name("ratelimit.service.rate_limit") == "ratelimit_service_rate_limit");
  CHECK(escape_metric_name("a-b--c---d") == "a_b_c_d");  // a run of dashes is one '_'
  CHECK(escape_metric_name("1st.stat") == "_1st_stat");
  CHECK(escape_metric_name("caf\xC3\xA9:x") == "caf__x");  // one '_' per character, not per byte
  CHECK(escape_metric_name("") == "");

  CHECK(label_value("plain/value_1") == "plain/value_1");
  CHECK(label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(label_value("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(label_value("bad\xFF\xC3") == "bad\xEF\xBF\xBD\xEF\xBF\xBD");

  CHECK(number(0) == "0");
  CHECK(number(1000000) == "1000000");
  CHECK(number(0.005) == "0.005");
  CHECK(number(2.5) == "2.5");
  CHECK(number(1e-05) == "1e-05");
  CHECK(number(1.0 / 0.0) == "+Inf");
}

TEST_CASE("prometheus mapper: glob parts, $n labels, first glob wins, metric type filter, drop") {
  auto m = prometheus_mapper::parse(R"(
mappings:
  - match: "app.*.requests"
    name: "app_requests_total"
    match_metric_type: counter
    labels: {service: "$1", both: "${1}x", undefined: "$1x", dollar: "$$1", missing: "$7"}
  - match: "app.*.*"
    name: "app_$2"
    help: "Anything else of the app."
    labels: {service: "$1"}
  - match: "app.debug.*"
    action: drop
  - match: "noise.*"
    action: drop
)");
  auto t = m.map("app.api.requests", stat_type::counter);
  CHECK_FALSE(t.drop);
  CHECK(t.name == "app_requests_total");
  CHECK(t.labels ==
        labels{{"both", "apix"}, {"dollar", "$1"}, {"missing", ""}, {"service", "api"}, {"undefined", ""}});
  CHECK(t.help.empty());

  // Same name as a gauge: the first mapping is for counters only, so the second one applies.
  t = m.map("app.api.requests", stat_type::gauge);
  CHECK(t.name == "app_requests");
  CHECK(t.labels == labels{{"service", "api"}});
  CHECK(t.help == "Anything else of the app.");

  // "app.*.*" comes before the drop rule, so it wins.
  CHECK(m.map("app.debug.x", stat_type::counter).name == "app_x");
  CHECK(m.map("noise.x", stat_type::counter).drop);
  // '*' is one whole part: neither fewer nor more parts match.
  CHECK(m.map("noise", stat_type::counter).name == "noise");
  CHECK(m.map("noise.x.y", stat_type::counter).name == "noise_x_y");
  CHECK(m.map("other-thing.v1", stat_type::gauge).name == "other_thing_v1");
}

TEST_CASE("prometheus mapper: regexes are searched in order, after every glob, with Go's $ expansion") {
  auto m = prometheus_mapper::parse(R"(
defaults:
  match_type: regex
mappings:
  - match: 'svc\.([a-z]+)\.latency'
    name: 'svc_latency_seconds'
    scale: 0.001
    histogram_options: {buckets: [0.1, 1]}
    labels: {svc: '$1', whole: '$0'}
  - match: 'svc\.(.*)'
    name: 'svc_other'
    labels: {rest: '$1'}
  - match: 'svc.*.latency'
    match_type: glob
    name: 'glob_first'
)");
  auto t = m.map("svc.api.latency", stat_type::observer);
  CHECK(t.name == "glob_first");
  t = m.map("svc.api.latency.p99", stat_type::observer);  // not anchored, as statsd_exporter
  CHECK(t.name == "svc_latency_seconds");
  CHECK(t.labels == labels{{"svc", "api"}, {"whole", "svc.api.latency"}});
  CHECK(t.scale == 0.001);
  CHECK(*t.buckets == std::vector{0.1, 1.0});
  t = m.map("svc.Api.latency.x", stat_type::counter);
  CHECK(t.name == "svc_other");
  CHECK(t.labels == labels{{"rest", "Api.latency.x"}});
  CHECK(t.buckets->size() == 11);  // Prometheus' default buckets
}

TEST_CASE("prometheus mapper: mapping file errors say what and where") {
  CHECK(parse_error("mappings: [").starts_with("line "));
  CHECK(parse_error("mappings:\n  - match: a.b\n    nmae: x\n") ==
        "mapping #1 (match 'a.b'): unknown key 'nmae'");
  CHECK(parse_error("mappings:\n  - match: a.b\n") == "mapping #1 (match 'a.b'): 'name' is missing");
  CHECK(parse_error("mappings:\n  - name: x\n") == "mapping #1: 'match' is missing");
  CHECK(parse_error("mappings:\n  - {match: a.b*, name: x}\n") ==
        "mapping #1 (match 'a.b*'): in a glob match '*' stands for one whole dot-separated part (use "
        "match_type: regex)");
  CHECK(parse_error("mappings:\n  - {match: a..b, name: x}\n") ==
        "mapping #1 (match 'a..b'): a glob match cannot have an empty part");
  CHECK(parse_error("mappings:\n  - {match: 'a(', match_type: regex, name: x}\n")
            .starts_with("mapping #1 (match 'a('): invalid regex: "));
  CHECK(parse_error("mappings:\n  - {match: a.b, name: 'x.y'}\n") ==
        "mapping #1 (match 'a.b'): 'name' 'x.y' is not a metric name (letters, digits, '_', $n)");
  CHECK(parse_error("mappings:\n  - {match: a.b, name: x, labels: {1a: v}}\n") ==
        "mapping #1 (match 'a.b'): '1a' is not a label name");
  CHECK(parse_error("mappings:\n  - {match: a.b, name: x, labels: {le: v}}\n") ==
        "mapping #1 (match 'a.b'): label 'le' is reserved for histogram buckets");
  CHECK(parse_error("mappings:\n  - {match: a.b, name: x, labels: {k: $1, j: v, k: $2}}\n") ==
        "mapping #1 (match 'a.b'): label 'k' is given twice");
  CHECK(parse_error("mappings:\n  - {match: a.b, name: x, histogram_options: {buckets: [1, 0.5]}}\n") ==
        "mapping #1 (match 'a.b'): 'buckets' must be in increasing order");
  CHECK(parse_error("mappings:\n  - {match: a.b, name: x, scale: fast}\n") ==
        "mapping #1 (match 'a.b'): 'scale' must be a finite number");
  CHECK(parse_error("mappings:\n  - {match: a.b, name: x, action: keep}\n") ==
        "mapping #1 (match 'a.b'): 'action' is 'keep'; expected one of map, drop");
  CHECK(parse_error("defaults: {timer: x}\n") == "defaults: unknown key 'timer'");
  CHECK(parse_error("- a\n") == "the file must be a map with 'mappings' (and 'defaults')");
  CHECK(parse_error("") == "no error");

  auto m = prometheus_mapper::parse("mappings:\n  - {match: a.b, name: x, timer_type: summary}\n");
  REQUIRE(m.warnings().size() == 1);
  CHECK(m.warnings()[0] == "mapping #1 (match 'a.b'): observer_type summary is served as a histogram");
}

TEST_CASE("prometheus mapper: regexes take time linear in the name, whatever the pattern or the length") {
  // A request's domain or descriptor value ends up in a name: 100 KB of it overflowed std::regex's stack.
  auto builtin = prometheus_mapper::builtin(false);
  const std::string deep = "ratelimit.service.rate_limit.a.b.c.d.e.f.g.h.i.j";
  const auto t = builtin.map(deep + std::string(100'000, 'x') + ".total_hits", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_total_hits");
  REQUIRE(t.labels.size() == 10);
  CHECK(t.labels[9].first == "key_rest");
  CHECK(t.labels[9].second.size() == 100'001);
  // Nested quantifiers backtracked exponentially in std::regex: 2^40 steps for this name.
  auto nested = prometheus_mapper::parse("mappings:\n  - {match: '(a*)*b', match_type: regex, name: x}\n");
  CHECK(nested.map(std::string(40, 'a'), stat_type::counter).name == std::string(40, 'a'));
  CHECK(nested.map(std::string(40, 'a') + "b", stat_type::counter).name == "x");
}

TEST_CASE("prometheus mapper: PROMETHEUS_MAPPER_YAML errors name the setting and the file") {
  CHECK_THROWS_WITH_AS(
      prometheus_mapper::from_file("/nonexistent/mapping.yaml"),
      "PROMETHEUS_MAPPER_YAML: cannot read '/nonexistent/mapping.yaml': No such file or directory",
      core::settings_error);
  const std::string path = "prometheus_test_mapping.yaml";
  std::ofstream(path) << "mappings:\n  - match: a.b\n";
  CHECK_THROWS_WITH_AS(
      prometheus_mapper::from_file(path),
      "PROMETHEUS_MAPPER_YAML: invalid mapping file 'prometheus_test_mapping.yaml': mapping #1 "
      "(match 'a.b'): 'name' is missing",
      core::settings_error);
  std::remove(path.c_str());
}

TEST_CASE("prometheus mapper: the built-in mapping keeps upstream's names and every descriptor level") {
  auto m = prometheus_mapper::builtin(false);
  CHECK(m.warnings().empty());
  auto t = m.map("ratelimit.service.rate_limit.mongo_cps.database_users.total_hits", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_total_hits");
  CHECK(t.labels == labels{{"domain", "mongo_cps"}, {"key1", "database_users"}});

  t = m.map("ratelimit.service.rate_limit.d.k1_v1.k2_v2.within_limit", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_within_limit");
  CHECK(t.labels == labels{{"domain", "d"}, {"key1", "k1_v1"}, {"key2", "k2_v2"}});

  // upstream keeps only key1 and key2 here; the built-in mapping keeps every level.
  t = m.map("ratelimit.service.rate_limit.d.a.b.c_1.d.over_limit", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_over_limit");
  CHECK(t.labels == labels{{"domain", "d"}, {"key1", "a"}, {"key2", "b"}, {"key3", "c_1"}, {"key4", "d"}});

  t = m.map("ratelimit.service.rate_limit.d.1.2.3.4.5.6.7.8.9.10.shadow_mode", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_shadow_mode");
  CHECK(t.labels == labels{{"domain", "d"},
                           {"key1", "1"},
                           {"key2", "2"},
                           {"key3", "3"},
                           {"key4", "4"},
                           {"key5", "5"},
                           {"key6", "6"},
                           {"key7", "7"},
                           {"key8", "8"},
                           {"key_rest", "9.10"}});

  // A value_regex pattern is one level whatever dots it holds (stats::one_level), and its label shows it
  // whole.
  const auto pattern_name = "ratelimit.service.rate_limit.api.path_" + one_level("/api/.*") + ".sub_" +
                            one_level("a.b") + ".total_hits";
  t = m.map(pattern_name, stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_total_hits");
  CHECK(t.labels == labels{{"domain", "api"}, {"key1", "path_/api/.*"}, {"key2", "sub_a.b"}});

  // Deeper than 8 levels, every per-rule stat keeps its family (total_negative_hits was missing).
  CHECK(m.map("ratelimit.service.rate_limit.d.1.2.3.4.5.6.7.8.9.total_negative_hits", stat_type::counter)
            .name == "ratelimit_service_rate_limit_total_negative_hits");

  // Its own family, not folded into over_limit as upstream's unanchored regex does from two levels on.
  t = m.map("ratelimit.service.rate_limit.d.a.b.over_limit_with_local_cache", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_over_limit_with_local_cache");

  t = m.map("ratelimit.service.rate_limit.unknown.domain_not_found", stat_type::counter);
  CHECK(t.name == "ratelimit_service_rate_limit_domain_not_found");
  CHECK(t.labels == labels{{"domain", "unknown"}});

  t = m.map("ratelimit.service.call.should_rate_limit.redis_error", stat_type::counter);
  CHECK(t.name == "ratelimit_service_should_rate_limit_error");
  CHECK(t.labels == labels{{"err_type", "redis_error"}});

  t = m.map("ratelimit_server.ShouldRateLimit.total_requests", stat_type::counter);
  CHECK(t.name == "ratelimit_service_total_requests");
  CHECK(t.labels == labels{{"grpc_method", "ShouldRateLimit"}});

  t = m.map("ratelimit_server.ShouldRateLimit.response_time", stat_type::observer);
  CHECK(t.name == "ratelimit_service_response_time_seconds");
  CHECK(t.scale == 0.001);
  CHECK(prometheus_mapper::builtin(true)
            .map("ratelimit_server.Check.response_time", stat_type::observer)
            .scale == 1.0);

  t = m.map("ratelimit.http.json.response_time", stat_type::observer);
  CHECK(t.name == "ratelimit_http_json_response_time_seconds");
  CHECK(t.scale == 0.001);

  CHECK(m.map("ratelimit.service.config_load_success", stat_type::counter).name ==
        "ratelimit_service_config_load_success");
  CHECK(m.map("ratelimit.service.config_load_error", stat_type::counter).name ==
        "ratelimit_service_config_load_error");
  CHECK(m.map("ratelimit.service.global_shadow_mode", stat_type::counter).name ==
        "ratelimit_service_global_shadow_mode");
}

TEST_CASE("prometheus exporter: a hidden gauge leaves the text, and comes back when set (a removed rule)") {
  store s;
  prometheus_exporter exporter(s, prometheus_mapper::builtin(false));
  auto& limit = s.get_gauge("ratelimit.service.rate_limit.d.gone.limit");
  limit.set(5);
  s.get_gauge("ratelimit.service.rate_limit.d.kept.limit").set(7);
  const std::string gone = "ratelimit_service_rate_limit_limit{domain=\"d\",key1=\"gone\"} 5\n";
  CHECK(exporter.render().find(gone) != std::string::npos);
  limit.hide();
  auto text = exporter.render();
  CHECK(text.find("key1=\"gone\"") == std::string::npos);
  CHECK(text.find("ratelimit_service_rate_limit_limit{domain=\"d\",key1=\"kept\"} 7\n") != std::string::npos);
  // The whole family goes when none of its series is left.
  s.get_gauge("ratelimit.service.rate_limit.d.kept.limit").hide();
  CHECK(exporter.render().find("ratelimit_service_rate_limit_limit") == std::string::npos);
  limit.set(5);
  CHECK(exporter.render().find(gone) != std::string::npos);
}

TEST_CASE("prometheus exporter: exposition text, sorted, with merged series, histograms and drops") {
  store s;
  auto mapper = prometheus_mapper::parse(R"(
mappings:
  - match: "rl.*.*.hits"
    name: "rl_hits"
    help: "Hits.\nPer rule \\ domain."
    labels: {domain: "$1", key: "$2"}
  - match: "rl.*.*.*.hits"
    name: "rl_hits"
    labels: {domain: "$1", key: "$2"}
  - match: "srv.*.time"
    name: "srv_time_seconds"
    scale: 0.001
    histogram_options: {buckets: [0.01, 0.1]}
    labels: {method: "$1"}
  - match: "drop.*"
    action: drop
  - match: "clash"
    name: "rl_hits"
)");
  prometheus_exporter exporter(s, mapper);
  s.set_timer_observer(&exporter);

  s.get_counter("rl.d.k_\"q\".hits").add(3);
  s.get_counter("rl.d.a.x.hits").add(2);  // both land in {domain="d",key="a"}
  s.get_counter("rl.d.a.y.hits").add(5);
  s.get_counter("drop.me").add(1);
  s.get_gauge("clash").set(9);  // the name is a counter already: left out
  s.get_gauge("pool.size").set(-4);
  auto& t = s.get_timer("srv.Check.time");
  for (double ms : {5.0, 10.0, 50.0, 400.0}) t.record(ms);
  s.get_timer("drop.timer").record(1);
  s.add_generator([&s] { s.get_gauge("pool.size").set(7); });

  CHECK(exporter.render() ==
        "# HELP pool_size Metric autogenerated by statsd_exporter.\n"
        "# TYPE pool_size gauge\n"
        "pool_size 7\n"
        "# HELP rl_hits Hits.\\nPer rule \\\\ domain.\n"
        "# TYPE rl_hits counter\n"
        "rl_hits{domain=\"d\",key=\"a\"} 7\n"
        "rl_hits{domain=\"d\",key=\"k_\\\"q\\\"\"} 3\n"
        "# HELP srv_time_seconds Metric autogenerated by statsd_exporter.\n"
        "# TYPE srv_time_seconds histogram\n"
        "srv_time_seconds_bucket{method=\"Check\",le=\"0.01\"} 2\n"
        "srv_time_seconds_bucket{method=\"Check\",le=\"0.1\"} 3\n"
        "srv_time_seconds_bucket{method=\"Check\",le=\"+Inf\"} 4\n"
        "srv_time_seconds_sum{method=\"Check\"} 0.465\n"
        "srv_time_seconds_count{method=\"Check\"} 4\n");
  s.set_timer_observer(nullptr);
}

TEST_CASE("prometheus exporter: concurrent observations are all counted") {
  store s;
  prometheus_exporter exporter(s, prometheus_mapper::builtin(false));
  s.set_timer_observer(&exporter);
  auto& t = s.get_timer("ratelimit_server.ShouldRateLimit.response_time");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&t] {
      for (int k = 0; k < 10000; ++k) t.record(2);  // 0.002 s: the 0.005 bucket
    });
  for (auto& th : threads) th.join();
  const auto text = exporter.render();
  CHECK(text.find(
            "ratelimit_service_response_time_seconds_bucket{grpc_method=\"ShouldRateLimit\",le=\"0.005\"} "
            "40000\n") != std::string::npos);
  CHECK(text.find("ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"} 40000\n") !=
        std::string::npos);
  s.set_timer_observer(nullptr);
}

TEST_CASE(
    "prometheus exporter: timers on one series add up; stats created after a scrape appear in the next") {
  store s;
  prometheus_exporter exporter(s, prometheus_mapper::parse(R"(
mappings:
  - match: "t.*.*"
    name: "t_seconds"
    scale: 0.001
    histogram_options: {buckets: [1]}
    labels: {a: "$1"}
)"));
  s.set_timer_observer(&exporter);
  s.get_timer("t.x.one").record(500);
  s.get_timer("t.x.two").record(2000);
  const std::string histogram =
      "# HELP t_seconds Metric autogenerated by statsd_exporter.\n"
      "# TYPE t_seconds histogram\n"
      "t_seconds_bucket{a=\"x\",le=\"1\"} 1\n"
      "t_seconds_bucket{a=\"x\",le=\"+Inf\"} 2\n"
      "t_seconds_sum{a=\"x\"} 2.5\n"
      "t_seconds_count{a=\"x\"} 2\n";
  CHECK(exporter.render() == histogram);
  s.get_counter("late.stat").add(2);
  s.get_counter("t_seconds_count").add(1);  // would repeat a sample name of the histogram: left out
  CHECK(exporter.render() ==
        "# HELP late_stat Metric autogenerated by statsd_exporter.\n"
        "# TYPE late_stat counter\n"
        "late_stat 2\n" +
            histogram);
  s.set_timer_observer(nullptr);
}

TEST_CASE("PROMETHEUS_ADDR and PROMETHEUS_PATH") {
  auto a = parse_prometheus_addr(":9090");
  CHECK((a.host == "0.0.0.0" && a.port == 9090));
  a = parse_prometheus_addr("127.0.0.1:0");
  CHECK((a.host == "127.0.0.1" && a.port == 0));
  a = parse_prometheus_addr("[::1]:9102");
  CHECK((a.host == "::1" && a.port == 9102));
  a = parse_prometheus_addr("localhost:9102");
  CHECK((a.host == "localhost" && a.port == 9102));
  for (const char* bad : {"9090", "::1:9090", "host:", "host:65536", "host:x", "[::1:9090", "[]:1"}) {
    CAPTURE(bad);
    const std::string expected = core::cat("invalid value '", bad, "' for PROMETHEUS_ADDR");
    CHECK_THROWS_WITH_AS(parse_prometheus_addr(bad), doctest::Contains(expected.c_str()),
                         core::settings_error);
  }
  store s;
  sink_settings settings;
  CHECK(make_prometheus_exporter(settings, s) == nullptr);  // statsd is the default sink
  settings.kind = sink_kind::prometheus;
  CHECK(make_prometheus_exporter(settings, s) != nullptr);
  settings.prometheus_path = "metrics";
  CHECK_THROWS_WITH_AS(make_prometheus_exporter(settings, s),
                       "invalid value 'metrics' for PROMETHEUS_PATH: expected a path starting with /",
                       core::settings_error);
}
