#include "ratelimit/api/dashboard.hpp"

#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <limits>
#include <optional>

#include "ratelimit/api/plain_json.hpp"

using namespace sluice;
namespace json = boost::json;

namespace {

const char* const rules = R"(domain: shop
descriptors:
  - key: user
    descriptors:
      - key: action
        value: upload
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: sliding_window}
  - key: quiet
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
)";

stats::top_entry entry(std::string domain, std::string rule, std::vector<std::string> entries,
                       std::uint64_t count) {
  return {std::move(domain), std::move(rule), std::move(entries), count};
}

}  // namespace

TEST_CASE("top_json: the fixed shape, most first as given") {
  stats::top_lists top;
  top.window_seconds = 57;
  top.over_limit = {entry("shop", "ip", {"ip=10.0.0.1"}, 9)};
  top.hits = {entry("shop", "user.action_upload", {"user=a", "action=upload"}, 30),
              entry("shop", "ip", {"ip=\"q\""}, 9)};
  CHECK(stats::top_window_seconds(1'795'000'059) == 60);
  CHECK(json::parse(ratelimit::api::top_json(top)) == json::parse(R"({"window_seconds":57,
          "over_limit":[{"domain":"shop","entries":["ip=10.0.0.1"],"rule":"ip","count":9}],
          "hits":[{"domain":"shop","entries":["user=a","action=upload"],"rule":"user.action_upload","count":30},
                  {"domain":"shop","entries":["ip=\"q\""],"rule":"ip","count":9}]})"));
}

TEST_CASE("dashboard_json: series by rule with limits and utilisation, totals, top, health, reloads") {
  stats::store store;
  core::health health;
  health.add_component("running", true);
  health.add_component("redis", false);
  ratelimit::service::rules_source source(
      {}, [](auto) {}, store, health);
  REQUIRE_FALSE(source.apply_xds({{"shop.yaml", rules}}));
  CHECK(source.apply_xds({{"bad.yaml", "domain: [x"}}));
  using totals = ratelimit::api::dashboard_totals;
  stats::series_history history(
      store, {std::string(totals::grpc_requests), std::string(totals::json_requests)},
      {std::string(totals::latency_timer), std::string(totals::json_latency_timer)}, 10);
  auto& detailed = store.get_counter("ratelimit.service.rate_limit.shop.ip_10_0_0_1.total_hits");
  history.sample(100.0, 100.0);
  store.get_counter("ratelimit.service.rate_limit.shop.user.action_upload.total_hits").add(40);
  store.get_counter("ratelimit.service.rate_limit.shop.user.action_upload.over_limit").add(6);
  detailed.add(4);  // detailed_metric
  store.get_counter(std::string(totals::grpc_requests)).add(44);
  // Decisions and latency count both transports (issue 40: /json traffic showed 0 decisions/s).
  store.get_counter(std::string(totals::json_requests)).add(6);
  store.get_timer(std::string(totals::latency_timer)).record(1.0);
  store.get_timer(std::string(totals::json_latency_timer)).record(3.0);
  history.sample(102.0, 102.0);

  stats::top_lists top;
  top.window_seconds = 60;
  top.hits = {entry("shop", "user.action_upload", {"user=a", "action=upload"}, 30),
              entry("shop", "quiet", {"quiet=q"}, 4)};
  const auto out =
      json::parse(ratelimit::api::dashboard_json({history, source, health, top, 10, "redis", 102.5, 1.0}))
          .as_object();
  CHECK(out.at("now").as_double() == 102.5);
  CHECK(out.at("times") == json::parse("[102.0]"));
  CHECK(out.at("totals").at("decisions") == json::parse("[25.0]"));
  CHECK(out.at("totals").at("latency_ms") == json::parse("[2.0]"));
  CHECK(out.at("totals").at("hits") == json::parse("[22.0]"));
  CHECK(out.at("totals").at("over_limit") == json::parse("[3.0]"));
  const auto& series = out.at("rules").as_array();
  // The most throttled first: user.action_upload (over-limit), then the busiest.
  REQUIRE(series.size() >= 3);
  const auto& first = series[0].as_object();
  CHECK(first.at("domain") == "shop");
  CHECK(first.at("rule") == "user.action_upload");
  CHECK(first.at("key") == "shop.user.action_upload");
  CHECK(first.at("limit") == json::parse(R"({"requests_per_unit":10,"unit":"MINUTE","window_seconds":60,
                                            "algorithm":"fixed_window","shadow_mode":false,"unlimited":false})"));
  CHECK(first.at("hits") == json::parse("[20.0]"));
  CHECK(first.at("over_limit") == json::parse("[3.0]"));
  // 30 hits in 60 s, 60-second windows: 30 of 10.
  CHECK(first.at("utilisation").as_double() == doctest::Approx(3.0));
  const auto& by_value = series[1].as_object();  // named from the request: no limit
  CHECK(by_value.at("key") == "shop.ip_10_0_0_1");
  CHECK(by_value.at("domain") == "shop");
  CHECK(by_value.at("rule") == "ip_10_0_0_1");
  CHECK(by_value.at("limit").is_null());
  CHECK(by_value.at("utilisation").is_null());
  bool quiet = false;
  for (const auto& s : series) {
    if (s.at("key") == "shop.quiet") {
      quiet = true;
      CHECK(s.at("limit").at("shadow_mode") == true);
      // An hour's window: what the last minute took of it, 4 of 1 (not a projection over the hour).
      CHECK(s.at("utilisation").as_double() == doctest::Approx(4.0));
    }
  }
  CHECK(quiet);
  CHECK(out.at("top").at("hits").as_array().size() == 2);
  CHECK(out.at("backend") == json::parse(R"({"type":"redis","healthy":false,
      "components":[{"name":"running","healthy":true},{"name":"redis","healthy":false}],"regions":null})"));
  const auto& reloads = out.at("reloads").as_array();
  REQUIRE(reloads.size() == 2);
  CHECK(reloads[0].at("ok") == false);  // newest first
  CHECK(reloads[0].at("source") == "xDS resources");
  CHECK(reloads[0].at("error").as_string().starts_with("bad.yaml: "));
  CHECK(reloads[1].at("ok") == true);
  CHECK(reloads[1].at("domains") == 1);
}

TEST_CASE("plain_json: doubles as plain decimals, not 1E0 (issue 40); the rest as Boost.JSON writes it") {
  const json::value v{{"now", 1795000000.5},
                      {"one", 1.0},
                      {"rates", json::array{0.25, 0.0, 1e-7, 12.0}},
                      {"n", 3},
                      {"s", "a\"b"},
                      {"ok", true},
                      {"none", nullptr},
                      {"inf", std::numeric_limits<double>::infinity()}};
  const auto text = ratelimit::api::plain_json(v);
  CHECK(text ==
        R"({"now":1795000000.5,"one":1.0,"rates":[0.25,0.0,0.0000001,12.0],"n":3,"s":"a\"b","ok":true,)"
        R"("none":null,"inf":null})");
  CHECK(text.find('E') == std::string::npos);
  CHECK(json::parse(text).at("now").as_double() == 1795000000.5);
}

TEST_CASE(
    "dashboard_json: a share_threshold rule's utilisation is its shared counter's, every value together") {
  stats::store store;
  core::health health;
  ratelimit::service::rules_source source(
      {}, [](auto) {}, store, health);
  REQUIRE_FALSE(source.apply_xds({{"ai.yaml", R"(domain: ai
descriptors:
  - key: model
    value: gpt*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
)"}}));
  using totals = ratelimit::api::dashboard_totals;
  stats::series_history history(
      store, {std::string(totals::grpc_requests), std::string(totals::json_requests)},
      {std::string(totals::latency_timer), std::string(totals::json_latency_timer)}, 10);
  auto& shared = store.get_counter("ratelimit.service.rate_limit.ai.model_gpt*.total_hits");
  auto& users = store.get_counter("ratelimit.service.rate_limit.ai.user.total_hits");
  history.sample(100.0, 100.0);
  shared.add(12);
  users.add(12);
  history.sample(101.0, 101.0);
  stats::top_lists top;
  top.window_seconds = 60;
  // Three values of one shared counter: 12 of 10 together, though none alone is over. Values of a rule
  // without share_threshold count apart.
  top.hits = {entry("ai", "model_gpt*", {"model=gpt-4"}, 5), entry("ai", "model_gpt*", {"model=gpt-4o"}, 4),
              entry("ai", "model_gpt*", {"model=gpt-3.5"}, 3), entry("ai", "user", {"user=a"}, 5),
              entry("ai", "user", {"user=b"}, 4)};
  const auto out =
      json::parse(ratelimit::api::dashboard_json({history, source, health, top, 10, "memory", 101.5, 1.0}))
          .as_object();
  std::optional<double> model, user;
  for (const auto& r : out.at("rules").as_array()) {
    if (r.at("key") == "ai.model_gpt*") model = r.at("utilisation").as_double();
    if (r.at("key") == "ai.user") user = r.at("utilisation").as_double();
  }
  REQUIRE(model);
  REQUIRE(user);
  CHECK(*model == doctest::Approx(1.2));
  CHECK(*user == doctest::Approx(0.5));
}

TEST_CASE("dashboard_json: the regions, from the ratelimit.redis_region gauges") {
  stats::store store;
  core::health health;
  ratelimit::service::rules_source source(
      {}, [](auto) {}, store, health);
  stats::series_history history(store, {}, {}, 10);
  stats::top_lists top;
  const auto without =
      json::parse(ratelimit::api::dashboard_json({history, source, health, top, 10, "redis", 1, 1, &store}));
  CHECK(without.at("backend").at("regions").is_null());  // no REDIS_REGION: no gauges
  store.get_gauge("ratelimit.redis_region.this_region.eu").set(1);
  store.get_gauge("ratelimit.redis_region.keys").set(12);
  store.get_gauge("ratelimit.redis_region.sharing").set(0);
  store.get_gauge("ratelimit.redis_region.worst_overshoot").set(3);
  store.get_gauge("ratelimit.redis_region.us.reachable").set(1);
  store.get_gauge("ratelimit.redis_region.us.round_trip_ms").set(2);
  store.get_gauge("ratelimit.redis_region.ap.reachable").set(0);
  store.get_gauge("ratelimit.redis_region.ap.totals_age_ms").set(2500);
  const auto with =
      json::parse(ratelimit::api::dashboard_json({history, source, health, top, 10, "redis", 1, 1, &store}));
  CHECK(with.at("backend").at("regions") == json::parse(R"({"region":"eu","keys":12,"sharing":0,
      "worst_overshoot":3,"remotes":[{"reachable":0,"totals_age_ms":2500,"name":"ap"},
      {"reachable":1,"round_trip_ms":2,"name":"us"}]})"));
}
