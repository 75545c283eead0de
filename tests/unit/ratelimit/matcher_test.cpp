#include <doctest/doctest.h>

#include "ratelimit/config/rule_explain.hpp"
#include "ratelimit/config/rule_set.hpp"
#include "rules_fixture.hpp"

using namespace sluice::ratelimit::config;
using sluice::test::compile_rules;

// Named: unity builds put several test files in one translation unit.
namespace matcher_test {

namespace {

const char* const rules_yaml = R"(
domain: d
descriptors:
  - key: k
    value: exact
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: "ex*"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: mid
    value: "bar*b"
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: parent
    value: p
    rate_limit: {unit: hour, requests_per_unit: 5}
    descriptors:
      - key: child
        rate_limit: {unit: day, requests_per_unit: 6}
        descriptors:
          - key: grandchild
            value: g
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: second, requests_per_unit: 8}
  - key: files
    value: "top/*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 9}
)";

struct fixture : sluice::test::matcher_fixture {
  fixture() : matcher_fixture(rules_yaml) {}
};

}  // namespace

TEST_CASE("wildcard_match follows upstream's examples") {
  auto parts = [](std::initializer_list<const char*> p) {
    return std::vector<std::string>(p.begin(), p.end());
  };
  CHECK(wildcard_match(parts({"foo", ""}), "foo1"));
  CHECK_FALSE(wildcard_match(parts({"foo", ""}), "bar"));
  for (const char* yes : {"barab", "bar123b", "barb"}) CHECK(wildcard_match(parts({"bar", "b"}), yes));
  for (const char* no : {"bara", "xbarb"}) CHECK_FALSE(wildcard_match(parts({"bar", "b"}), no));
  CHECK(wildcard_match(parts({"foo", "bar", "baz"}), "foo123bar456baz"));
  CHECK(wildcard_match(parts({"foo", "bar", "baz"}), "foobarbaz"));
  CHECK_FALSE(wildcard_match(parts({"foo", "bar", "baz"}), "foo123baz"));
  CHECK_FALSE(wildcard_match(parts({"foo", "bar", "baz"}), "bar456baz"));
  CHECK_FALSE(wildcard_match(parts({"ab", "ba"}), "aba"));  // prefix and suffix may not overlap
  CHECK(wildcard_match(parts({"k_", ""}), "k_"));           // a lone '*' matches an empty value
}

TEST_CASE("exact beats wildcard beats key-only default") {
  fixture f;
  CHECK(f.limit_of({{"k", "exact"}}) == 1);
  CHECK(f.limit_of({{"k", "exactly"}}) == 2);
  CHECK(f.limit_of({{"k", "other"}}) == 3);
  CHECK(f.limit_of({{"k", ""}}) == 3);
  CHECK(f.limit_of({{"mid", "bar123b"}}) == 4);
  CHECK(f.limit_of({{"mid", "bara"}}) == 0);
  CHECK(f.limit_of({{"unknown", "x"}}) == 0);
}

TEST_CASE("a limit applies only at the depth of the request's last entry") {
  fixture f;
  CHECK(f.limit_of({{"parent", "p"}}) == 5);
  CHECK(f.limit_of({{"parent", "p"}, {"child", "any"}}) == 6);
  // Deeper than the config: no limit; the allow-listed grandchild has none either.
  CHECK(f.limit_of({{"parent", "p"}, {"child", "any"}, {"grandchild", "g"}}) == 0);
  CHECK(f.limit_of({{"parent", "p"}, {"child", "any"}, {"grandchild", "g"}, {"more", "x"}}) == 0);
  CHECK(f.limit_of({{"parent", "q"}, {"child", "any"}}) == 0);
  CHECK(f.limit_of({{"k", "exact"}, {"child", "any"}}) == 0);
  CHECK(f.limit_of({}) == 0);
}

TEST_CASE("stats keys: config path by default, request values with detailed_metric or value_to_metric") {
  fixture f;
  auto plain = f.get({{"k", "other"}});
  CHECK(plain.node->stats_key == "d.k");
  CHECK_FALSE(plain.stats_key);
  CHECK(f.get({{"k", "exactly"}}).node->stats_key == "d.k_ex*");

  auto detailed = f.get({{"detailed", "v1"}});
  REQUIRE(detailed.stats_key);
  CHECK(*detailed.stats_key == "d.detailed_v1");
  CHECK(*f.get({{"detailed", ""}}).stats_key == "d.detailed_");

  auto vtm = f.get({{"route", "draw"}, {"method", "GET"}});
  REQUIRE(vtm.stats_key);
  CHECK(*vtm.stats_key == "d.route_draw.method_GET");
}

TEST_CASE("share_threshold puts the pattern in the cache key for that level") {
  fixture f;
  auto m = f.get({{"files", "top/a.txt"}});
  REQUIRE(m.node != nullptr);
  REQUIRE(m.shared_values.size() == 1);
  CHECK(m.shared_values[0] == "top/*");
  CHECK(f.get({{"k", "exactly"}}).shared_values.empty());
}

// explain_match (POST /explain) walks as get_limit does, and says why it stopped.
TEST_CASE("explain: the walk, its outcome and the nearest rules that did not match") {
  fixture f;
  auto walk = [&](std::vector<entry> e) { return explain_match(f.domain, e); };

  auto w = walk({{"k", "exact"}});
  REQUIRE(w.rule != nullptr);
  CHECK(w.rule == f.get({{"k", "exact"}}).node);
  REQUIRE(w.path.size() == 1);
  CHECK(w.path[0].how == matched_by::exact);
  CHECK(w.outcome == "matched d.k_exact (exact) at the request's last entry");
  CHECK(walk({{"k", "exam"}}).path.at(0).how == matched_by::wildcard);
  CHECK(walk({{"k", "other"}}).path.at(0).how == matched_by::key_only);
  // A wildcard matches the composite "key_value" (upstream's wildcardMatch): key "k_exa" takes k / ex*.
  CHECK(walk({{"k_exa", "POST"}}).path.at(0).how == matched_by::wildcard);
  CHECK(walk({{"k_exa", "POST"}}).rule == f.get({{"k_exa", "POST"}}).node);

  // No rule at level 1: the nearest keys first ("mid" is one edit from "mix").
  w = walk({{"mix", "x"}});
  CHECK(w.rule == nullptr);
  CHECK(w.outcome == "no rule at level 1 takes mix=x in this domain");
  REQUIRE(!w.candidates.empty());
  CHECK(w.candidates[0].node->key == "mid");
  CHECK(w.candidates[0].why == "key differs: the rule wants key 'mid', the request has 'mix'");
  CHECK(w.candidates.size() <= 8);

  // A value that does not match: the pattern says why.
  w = walk({{"mid", "barx"}});
  CHECK(w.candidates.at(0).why == "the value 'barx' does not match pattern 'bar*b'");

  // Deeper level missing: the request ends where the rules go on.
  w = walk({{"route", "r"}});
  CHECK(w.rule == nullptr);
  CHECK(w.outcome == "d.route has no rate_limit of its own, and the request ends there");
  CHECK(w.candidates.at(0).why.find("deeper level missing: the rule goes on with key 'method'") == 0);
  CHECK(w.candidates[0].level == 1);

  // Deeper than the rules.
  w = walk({{"detailed", "x"}, {"more", "y"}});
  CHECK(w.rule == nullptr);
  CHECK(w.outcome.find("d.detailed has no deeper level for more=y") == 0);

  // Two levels, the second differs.
  w = walk({{"route", "r"}, {"method", "POST"}});
  REQUIRE(w.path.size() == 1);
  CHECK(w.outcome == "no rule at level 2 takes method=POST under d.route");
  CHECK(w.candidates.at(0).why == "value differs: the rule wants 'GET', the request has 'POST'");
  CHECK(walk({{"route", "r"}, {"method", "GET"}}).rule == f.get({{"route", "r"}, {"method", "GET"}}).node);
}

}  // namespace matcher_test
