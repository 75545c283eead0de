// Per-tenant limits (docs/guides/tenant-tables.md): limits_from at load, the table files' source (reloads,
// bad files, stats, /rlconfig), decisions with a table's rows (file and Redis tables, the latter through a
// fake reader), the local over-limit cache with raised limits, LIMITED_BY_METADATA and the IETF headers.

#include <doctest/doctest.h>

#include <google/protobuf/struct.pb.h>

#include <chrono>
#include <thread>

#include "../../support/temp_dir.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/table_lookup.hpp"
#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::test;
namespace svc = sluice::ratelimit::service;
namespace cfg = sluice::ratelimit::config;
using code = rls_response;

namespace {

constexpr const char* saas_rules = R"(domain: saas
descriptors:
  - key: tenant
    limits_from: plans
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: org
    descriptors:
      - key: user
        limits_from: plans
        rate_limit: {unit: hour, requests_per_unit: 1, algorithm: sliding_window}
)";

// A Redis table reader that answers from a map, at once or when told; or fails.
struct fake_reader final : ratelimit::limiter::table_reader {
  std::map<std::string, std::string> hash;  // "<table>/<value>" → field
  std::optional<std::string> failing;
  bool deferred = false;
  std::function<void()> pending;
  int reads = 0;

  void read(std::span<const query> queries, done_fn done) override {
    ++reads;
    auto answer = [this, queries, done = std::move(done)]() mutable {
      std::vector<std::optional<std::string>> fields;
      if (failing) return done(&*failing, fields);
      for (const auto& q : queries) {
        auto it = hash.find(std::string(q.table) + "/" + std::string(q.value));
        fields.push_back(it == hash.end() ? std::nullopt : std::optional<std::string>(it->second));
      }
      done(nullptr, fields);
    };
    if (deferred) {
      pending = std::move(answer);
    } else {
      answer();
    }
  }
};

struct tables_fixture {
  explicit tables_fixture(const std::string& csv, svc::limit_tables_settings s = {},
                          ratelimit::limiter::settings ls = {}, svc::settings ss = {},
                          fake_reader* reader = nullptr,
                          std::chrono::milliseconds ttl = std::chrono::seconds{10})
      : f("", ls, ss),
        lookup(ttl, reader, &health),
        source((s.directory = dir.path.string(), s), [this](auto set) { lookup.set_tables(std::move(set)); },
               f.stats) {
    if (!csv.empty()) dir.write("plans.csv", csv);
    errors = source.load().errors;
    f.service.set_table_lookup(&lookup);
  }

  // Loads `yaml` against the tables; "" on success, else the load error.
  std::string load(const std::string& yaml) {
    std::vector<cfg::config_file> files{{"saas.yaml", yaml}};
    auto r = cfg::load_rules(files, false, f.stats, true, &source);
    if (r.rules) f.service.set_rules(r.rules);
    return r.error;
  }

  code::Code decide(const std::string& key, const std::string& value) {
    return f.decide(make_request("saas", {{{key, value}}})).overall_code();
  }
  // How many of `n` requests for tenant `value` are admitted.
  int admitted(const std::string& value, int n, const std::string& key = "tenant") {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += decide(key, value) == code::OK ? 1 : 0;
    return ok;
  }

  testing::temp_dir dir{"sluice-tables"};
  service_fixture f;
  svc::redis_tables_health health;
  svc::table_lookup lookup;
  svc::limit_tables_source source;
  std::vector<std::string> errors;
};

}  // namespace

TEST_CASE("limits_from: a value in the table gets its row; others the rule's limit") {
  tables_fixture t("value,requests_per_unit,unit\nacme,5\nfree,unlimited\nblocked,0\nhourly,3,hour\n");
  REQUIRE(t.errors.empty());
  REQUIRE(t.load(saas_rules).empty());
  CHECK(t.admitted("acme", 8) == 5);
  CHECK(t.admitted("someone", 8) == 2);
  CHECK(t.admitted("free", 50) == 50);
  CHECK(t.admitted("blocked", 3) == 0);
  CHECK(t.admitted("hourly", 8) == 3);
  // The row's unit is the window: an hour, not the rule's minute.
  const auto r = t.f.decide(make_request("saas", {{{"tenant", "hourly"}}}));
  CHECK(r.statuses(0).current_limit().unit() == code::RateLimit::HOUR);
  CHECK(r.statuses(0).current_limit().requests_per_unit() == 3);
  CHECK(r.statuses(0).duration_until_reset().seconds() > 60);
  // Nested: the value is the last entry's (the user), with the rule's algorithm.
  const auto nested = t.f.decide(make_request("saas", {{{"org", "o"}, {"user", "acme"}}}));
  CHECK(nested.statuses(0).current_limit().requests_per_unit() == 5);
  // Stats count under the rule; the table counts hits and misses.
  // (an unlimited row counts nothing, as an unlimited rule)
  CHECK(t.f.counter("ratelimit.service.rate_limit.saas.tenant.total_hits") == 8 + 8 + 3 + 8 + 1);
  CHECK(t.f.counter("ratelimit.limit_tables.plans.hits") == 8 + 50 + 3 + 8 + 1 + 1);
  CHECK(t.f.counter("ratelimit.limit_tables.plans.misses") == 8);
  CHECK(t.f.stats.get_gauge("ratelimit.limit_tables.plans.rows").value() == 4);
  CHECK(t.f.counter("ratelimit.limit_tables.plans.loads") == 1);
}

TEST_CASE("limits_from: on a wildcard rule, the request's value is looked up") {
  tables_fixture t("value,requests_per_unit\npro-acme,4\n");
  REQUIRE(t.load(R"(domain: saas
descriptors:
  - key: tenant
    value: "pro-*"
    limits_from: plans
    rate_limit: {unit: minute, requests_per_unit: 1}
)")
              .empty());
  CHECK(t.admitted("pro-acme", 6) == 4);
  CHECK(t.admitted("pro-other", 3) == 1);
  CHECK(t.admitted("free-acme", 3) == 3);  // no rule
}

TEST_CASE("limits_from: a request's own limit override still wins over the table") {
  tables_fixture t("value,requests_per_unit\nacme,5\n");
  REQUIRE(t.load(saas_rules).empty());
  auto request = make_request("saas", {{{"tenant", "acme"}}});
  auto* limit = request.mutable_descriptors(0)->mutable_limit();
  limit->set_requests_per_unit(1);
  limit->set_unit(envoy::type::v3::RateLimitUnit::MINUTE);
  CHECK(t.f.decide(request).overall_code() == code::OK);
  CHECK(t.f.decide(request).overall_code() == code::OVER_LIMIT);
}

TEST_CASE("limits_from: load errors name the rule and the table") {
  tables_fixture t("value,requests_per_unit\nacme,5\n");
  auto rules = [](const std::string& extra) {
    return "domain: saas\ndescriptors:\n  - key: tenant\n" + extra;
  };
  CHECK(t.load(rules("    limits_from: nothing\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")) ==
        "saas.yaml: rule 'saas.tenant': limits_from 'nothing': no table: there is no file nothing.csv in "
        "LIMIT_TABLES_DIR " +
            t.dir.path.string());
  CHECK(t.load(rules("    limits_from: plans\n")) ==
        "saas.yaml: rule 'saas.tenant': limits_from 'plans': needs a rate_limit, the limit of the values the "
        "table does not list");
  CHECK(
      t.load(rules("    limits_from: plans\n    rate_limit: {unlimited: true}\n")) ==
      "saas.yaml: rule 'saas.tenant': limits_from 'plans': the rate_limit must have a unit (rows without one "
      "use it), not unlimited");
  CHECK(
      t.load(rules("    limits_from: plans\n    rate_limits:\n      - {unit: minute, requests_per_unit: 2}\n"
                   "      - {unit: hour, requests_per_unit: 20}\n")) ==
      "saas.yaml: rule 'saas.tenant': limits_from 'plans': a table row replaces the one rate_limit; "
      "rate_limits "
      "has several");
  CHECK(
      t.load(rules("    limits_from: ../etc/passwd\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"))
          .find("a table name is made of letters") != std::string::npos);
  // Without any table source.
  stats::store scratch;
  std::vector<cfg::config_file> files{{"saas.yaml", saas_rules}};
  CHECK(cfg::load_rules(files, false, scratch).error ==
        "saas.yaml: rule 'saas.tenant': limits_from 'plans': no limit tables are set up (LIMIT_TABLES_DIR or "
        "LIMIT_TABLES_REDIS)");
}

TEST_CASE("limit tables: a changed file is swapped in; a bad one keeps the table in force; a gone one too") {
  tables_fixture t("value,requests_per_unit\nacme,5\n");
  REQUIRE(t.load(saas_rules).empty());
  CHECK(t.admitted("acme", 5) == 5);
  t.dir.write("plans.csv", "value,requests_per_unit\nacme,8\nnew,1\n");
  CHECK(t.source.load().errors.empty());
  CHECK(t.admitted("acme", 10) == 3);  // 8 in the same minute, 5 of them taken already
  CHECK(t.admitted("new", 3) == 1);
  CHECK(t.f.counter("ratelimit.limit_tables.plans.loads") == 2);

  t.dir.write("plans.csv", "value,requests_per_unit\nacme,100\nacme,1\n");
  const auto errors = t.source.load().errors;
  REQUIRE(errors.size() == 1);
  CHECK(errors[0] == (t.dir.path / "plans.csv").string() + ":3: the value 'acme' is on line 2 already");
  CHECK(t.f.counter("ratelimit.limit_tables.plans.failed_loads") == 1);
  CHECK(t.admitted("new", 1) == 0);  // still the table of 8 and 1
  CHECK(t.f.stats.get_gauge("ratelimit.limit_tables.plans.rows").value() == 2);
  CHECK(t.source.load().errors.empty());  // an unchanged file is not read again (nor counted)
  CHECK(t.f.counter("ratelimit.limit_tables.plans.failed_loads") == 1);

  std::filesystem::remove(t.dir.path / "plans.csv");
  CHECK(t.source.load().errors.empty());
  CHECK(t.admitted("new", 1) == 0);
  CHECK(t.source.dump() == "table=plans rows=2 source=" + t.dir.path.string() + "/plans.csv\n");
  // Rules loaded later still find it.
  CHECK(t.load(saas_rules).empty());
}

TEST_CASE("limit tables: a table that did not load refuses its rules; a table that appears later is found") {
  tables_fixture t("value,requests_per_unit\nacme,x\n");
  REQUIRE(t.errors.size() == 1);
  CHECK(t.load(saas_rules).find("the table's file " + t.dir.path.string() + "/plans.csv did not load") !=
        std::string::npos);
  t.dir.write("other.csv", "value,requests_per_unit\nacme,7\n");
  CHECK(t.source.load().errors.empty());  // (the bad file is not read again until it changes)
  CHECK(t.source.find("other"));
  CHECK_FALSE(t.source.find("plans"));
  std::string rules = saas_rules;
  rules.replace(rules.find("plans"), 5, "other");
  rules.replace(rules.find("plans"), 5, "other");
  REQUIRE(t.load(rules).empty());
  CHECK(t.admitted("acme", 9) == 7);
}

TEST_CASE("limit tables: a row raised while its key is over the low limit admits again (local cache)") {
  ratelimit::limiter::settings ls;
  ls.local_cache_size_bytes = 1 << 20;
  tables_fixture t("value,requests_per_unit\nacme,2\n", {}, ls);
  REQUIRE(t.load(saas_rules).empty());
  CHECK(t.admitted("acme", 4) == 2);
  CHECK(t.f.counter("ratelimit.service.rate_limit.saas.tenant.over_limit_with_local_cache") == 1);
  t.dir.write("plans.csv", "value,requests_per_unit\nacme,6\n");
  REQUIRE(t.source.load().errors.empty());
  // The counter holds 3 (the hit the local cache refused never reached it), so 3 more fit under 6.
  CHECK(t.admitted("acme", 4) == 3);
  // Lowered again: the local cache refuses without asking the store.
  t.dir.write("plans.csv", "value,requests_per_unit\nacme,3\n");
  REQUIRE(t.source.load().errors.empty());
  const auto before = t.f.counter("ratelimit.service.rate_limit.saas.tenant.over_limit_with_local_cache");
  CHECK(t.admitted("acme", 2) == 0);
  CHECK(t.f.counter("ratelimit.service.rate_limit.saas.tenant.over_limit_with_local_cache") == before + 2);
}

TEST_CASE("limit tables: Redis rows are read on first use, cached, and fall back while Redis fails") {
  fake_reader reader;
  reader.hash["plans/acme"] = "5";
  reader.hash["plans/hourly"] = "3/HOUR";
  reader.hash["plans/broken"] = "lots";
  svc::limit_tables_settings s;
  s.redis = true;
  tables_fixture t("", s, {}, {}, &reader);
  REQUIRE(t.load(saas_rules).empty());
  CHECK(t.source.dump() == "table=plans rows=0 source=redis:ratelimit_limits:plans\n");
  CHECK(t.admitted("acme", 8) == 5);
  CHECK(reader.reads == 1);  // then cached
  CHECK(t.admitted("someone", 4) == 2);
  CHECK(t.admitted("hourly", 4) == 3);
  CHECK(t.admitted("broken", 4) == 2);  // a bad field: the rule's limit, counted as a failed load
  CHECK(t.f.counter("ratelimit.limit_tables.plans.failed_loads") == 1);
  CHECK(t.f.counter("ratelimit.limit_tables.plans.loads") == 3);
  CHECK(t.f.stats.get_gauge("ratelimit.limit_tables.plans.rows").value() == 4);
  CHECK(reader.reads == 4);

  // Redis fails: a cached row still applies; an unknown value gets the rule's limit and is asked again later.
  reader.failing = "connection refused";
  reader.hash["plans/late"] = "9";
  CHECK(t.admitted("late", 4) == 2);
  CHECK(t.health.failing);
  CHECK(t.admitted("acme", 1) == 0);  // its 5 are used
  reader.failing.reset();

  // A lookup whose TTL is short reads again: the row changed in Redis meanwhile is seen.
  svc::table_lookup quick(std::chrono::milliseconds{1}, &reader, nullptr);
  quick.set_tables(std::make_shared<svc::table_set>(
      svc::table_set{{"plans"}, {nullptr}, {svc::table_counters::make(t.f.stats, "plans")}}));
  const cfg::table_ref ref{0, true};
  CHECK(quick.find(ref, "acme").fetch);
  quick.fetch(std::vector<svc::table_lookup::wanted>{{ref, "acme"}}, [] {});
  std::this_thread::sleep_for(std::chrono::milliseconds{5});
  CHECK(quick.find(ref, "acme").fetch);
  reader.hash["plans/acme"] = "50";
  std::vector<svc::table_lookup::wanted> wanted{{ref, "acme"}};
  quick.fetch(wanted, [] {});
  // (read again; within the millisecond it is fresh, or due again: either way the new row is what it holds)
  const auto again = quick.find(ref, "acme");
  CHECK((again.fetch || (again.row && again.row->requests_per_unit == 50)));
}

TEST_CASE("limit tables: the workers share the Redis rows read; a full cache drops expired rows first") {
  fake_reader reader;
  reader.hash["plans/acme"] = "5";
  stats::store stats;
  auto set = std::make_shared<svc::table_set>(
      svc::table_set{{"plans"}, {nullptr}, {svc::table_counters::make(stats, "plans")}});
  // Two workers: what one reads is sent to the other (in the server, by a post to each worker).
  svc::table_lookup one(std::chrono::seconds{10}, &reader, nullptr, true);
  svc::table_lookup two(std::chrono::seconds{10}, &reader, nullptr, false);
  auto to = [](svc::table_lookup& other) {
    return [&other](std::uint32_t table, std::string_view value, const svc::redis_table_cache::cached& row) {
      other.learn(table, value, row);
    };
  };
  one.set_share(to(two));
  two.set_share(to(one));
  one.set_tables(set);
  two.set_tables(set);
  const cfg::table_ref ref{0, true};
  std::vector<svc::table_lookup::wanted> wanted{{ref, "acme"}};
  REQUIRE(one.find(ref, "acme").fetch);
  one.fetch(wanted, [] {});
  CHECK(two.find(ref, "acme").row->requests_per_unit == 5);  // read by the other worker
  CHECK(reader.reads == 1);
  CHECK(stats.get_gauge("ratelimit.limit_tables.plans.rows").value() == 1);  // counted by one worker

  // Expired: one decision reads it again, the next ones keep the row meanwhile; the answer reaches both.
  svc::table_lookup quick_one(std::chrono::milliseconds{1}, &reader, nullptr, false);
  quick_one.set_share(to(two));
  quick_one.set_tables(set);
  reader.hash["plans/acme"] = "7";
  REQUIRE(quick_one.find(ref, "acme").fetch);
  quick_one.fetch(wanted, [] {});
  CHECK(two.find(ref, "acme").row->requests_per_unit == 7);  // learnt from quick_one's read
  std::this_thread::sleep_for(std::chrono::milliseconds{5});
  CHECK(quick_one.find(ref, "acme").fetch);        // the first to see it expired reads it
  CHECK_FALSE(quick_one.find(ref, "acme").fetch);  // the next ones do not, until the answer
  CHECK(quick_one.find(ref, "acme").row->requests_per_unit == 7);

  svc::redis_table_cache small(16);
  auto* rows = &stats.get_gauge("small.rows");
  for (int i = 0; i < 200; ++i) small.put(0, "v" + std::to_string(i), {std::nullopt, 1'000}, rows, 10);
  CHECK(small.size() <= 16);
  CHECK(rows->value() == static_cast<std::int64_t>(small.size()));
}

TEST_CASE("limit tables: a decision waits for its Redis rows, then goes on") {
  fake_reader reader;
  reader.deferred = true;
  reader.hash["plans/acme"] = "1";
  svc::limit_tables_settings s;
  s.redis = true;
  tables_fixture t("", s, {}, {}, &reader);
  REQUIRE(t.load(saas_rules).empty());
  rls_response response;
  bool done = false;
  const auto request = make_request("saas", {{{"tenant", "acme"}}, {{"tenant", "acme"}}});
  t.f.service.should_rate_limit(request, response, [&](const svc::service_error* e) {
    CHECK(e == nullptr);
    done = true;
  });
  CHECK_FALSE(done);
  REQUIRE(reader.pending);
  reader.pending();
  CHECK(done);
  CHECK(response.statuses(0).current_limit().requests_per_unit() == 1);
  CHECK(response.overall_code() == code::OVER_LIMIT);  // two hits on a limit of one
}

TEST_CASE("LIMITED_BY_METADATA: one entry per descriptor over its limit, shadow mode's marked") {
  svc::settings ss;
  ss.limited_by_metadata = true;
  ss.response_dynamic_metadata = true;
  service_fixture f(R"(domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1, name: a_limit}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: many
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {unit: hour, requests_per_unit: 100}
)",
                    {}, ss);
  const auto request = make_request("d", {{{"a", "1"}}, {{"s", "x"}}, {{"many", "m"}}, {{"free", "f"}}});
  auto first = f.decide(request);
  CHECK_FALSE(first.dynamic_metadata().fields().contains("limited_by"));
  CHECK(first.dynamic_metadata().fields().contains("domain"));  // upstream's, unchanged
  auto second = f.decide(request);
  CHECK(second.overall_code() == code::OVER_LIMIT);
  const auto& list = second.dynamic_metadata().fields().at("limited_by").list_value();
  REQUIRE(list.values_size() == 3);
  const auto& a = list.values(0).struct_value().fields();
  CHECK(a.at("domain").string_value() == "d");
  CHECK(a.at("rule").string_value() == "d.a");
  CHECK(a.at("entries").list_value().values(0).string_value() == "a=1");
  CHECK_FALSE(a.at("shadow").bool_value());
  CHECK(a.at("limit").struct_value().fields().at("requests_per_unit").number_value() == 1);
  CHECK(a.at("limit").struct_value().fields().at("unit").string_value() == "MINUTE");
  CHECK(a.at("limit").struct_value().fields().at("name").string_value() == "a_limit");
  const auto& s = list.values(1).struct_value().fields();
  CHECK(s.at("rule").string_value() == "d.s");
  CHECK(s.at("shadow").bool_value());
  const auto& many = list.values(2).struct_value().fields();
  CHECK(many.at("rule").string_value() == "d.many.second");
  CHECK(second.dynamic_metadata().fields().contains("descriptors"));
}

TEST_CASE("LIMIT_RESPONSE_HEADERS_FORMAT=ietf: RateLimit-Policy lists the limits, RateLimit the tightest") {
  svc::settings ss;
  ss.response_headers_enabled = true;
  ss.ietf_headers = true;
  service_fixture f(R"(domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10, name: per-minute}
  - key: b
    rate_limits:
      - {unit: second, requests_per_unit: 3}
      - {unit: day, requests_per_unit: 1000, name: daily}
  - key: c
    rate_limit: {requests_per_unit: 4, algorithm: concurrency}
  - key: s
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
)",
                    {}, ss);
  auto headers = [](const rls_response& r) {
    std::map<std::string, std::string> out;
    for (const auto& h : r.response_headers_to_add()) out[h.key()] = h.value();
    return out;
  };
  const auto r = f.decide(make_request("d", {{{"a", "1"}}, {{"b", "2"}}, {{"c", "3"}}, {{"s", "4"}}}));
  const auto h = headers(r);
  CHECK(h.size() == 2);
  CHECK(h.at("RateLimit-Policy") ==
        "\"per-minute\";q=10;w=60, \"d.b.second\";q=3;w=1, \"daily\";q=1000;w=86400, "
        "\"d.c\";q=4;qu=\"concurrent-requests\"");
  CHECK(h.at("RateLimit") == "\"d.b.second\";r=2;t=1");
  // Over a limit: that one, with r=0.
  for (int i = 0; i < 10; ++i) f.decide(make_request("d", {{{"a", "1"}}}));
  const auto over = headers(f.decide(make_request("d", {{{"a", "1"}}, {{"b", "9"}}})));
  CHECK(over.at("RateLimit").starts_with("\"per-minute\";r=0;t="));
  // Escaping and the default format.
  svc::settings plain;
  plain.response_headers_enabled = true;
  service_fixture g(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 10}\n", {},
      plain);
  const auto upstream = headers(g.decide(make_request("d", {{{"a", "1"}}})));
  CHECK(upstream.at("RateLimit-Limit") == "10");
  CHECK_FALSE(upstream.contains("RateLimit-Policy"));
}
