#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/config/value_regex.hpp"
#include "rules_fixture.hpp"

using namespace sluice::ratelimit::config;
using sluice::test::compile_rules;

// Named: unity builds put several test files in one translation unit.
namespace value_regex_test {

namespace {

const char* const rules_yaml = R"yaml(
domain: d
descriptors:
  - key: path
    value: /api/health
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: "/api/v1/*"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value_regex: "/api/v[0-9]+/users/[0-9]+"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value_regex: "/api/.*"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: user
    value_regex: "[a-z]+@example\\.com"
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: tenant
    value_regex: "t-[0-9]{3}"
    value_to_metric: true
    descriptors:
      - key: op
        value_regex: "read|list"
        shadow_mode: true
        rate_limit: {unit: hour, requests_per_unit: 7}
      - key: op
        rate_limit: {unit: hour, requests_per_unit: 8}
  - key: empty_ok
    value_regex: "(x|)"
    rate_limit: {unit: day, requests_per_unit: 9}
)yaml";

struct fixture : sluice::test::matcher_fixture {
  fixture() : matcher_fixture(rules_yaml) {}
};

std::string load_error(const std::string& yaml) {
  sluice::stats::store stats;
  std::vector<config_file> files{{"r.yaml", yaml}};
  return load_rules(files, false, stats).error;
}

}  // namespace

TEST_CASE("value_regex: exact, then wildcards, then patterns in file order, then the key alone") {
  fixture f;
  CHECK(f.limit_of({{"path", "/api/health"}}) == 1);      // exact
  CHECK(f.limit_of({{"path", "/api/v1/users/7"}}) == 2);  // the wildcard before any pattern
  CHECK(f.limit_of({{"path", "/api/v2/users/7"}}) == 3);  // both patterns match: the first in the file
  CHECK(f.limit_of({{"path", "/api/v2/orders"}}) == 4);
  CHECK(f.limit_of({{"path", "/web"}}) == 5);  // no pattern: the key-only rule
  // The whole value must match: a pattern found inside it is not enough.
  CHECK(f.limit_of({{"path", "x/api/v2/users/7"}}) == 5);
  CHECK(f.limit_of({{"path", "/api/v2/users/7/x"}}) == 4);
}

TEST_CASE("value_regex: a pattern applies to its own key only") {
  fixture f;
  // "/api/x" matches the path rules' patterns, not any rule of the key "tenant" or "user".
  CHECK(f.limit_of({{"user", "/api/v3/orders"}}) == 0);
  CHECK(f.limit_of({{"empty_ok", "/api/v3/orders"}}) == 0);
  CHECK(f.limit_of({{"user", "t-123"}}) == 0);
  CHECK(f.limit_of({{"tenant", "ann@example.com"}, {"op", "read"}}) == 0);
}

TEST_CASE("value_regex: nested levels, stats keys by pattern, detailed_metric and value_to_metric") {
  fixture f;
  auto read = f.get({{"tenant", "t-042"}, {"op", "read"}});
  REQUIRE(read.node != nullptr);
  CHECK(read.node->limit->requests_per_unit == 7);
  CHECK(read.node->shadow_mode);
  CHECK(read.node->stats_key == "d.tenant_t-[0-9]{3}.op_read|list");
  // value_to_metric on the tenant level: the runtime value there, the pattern below.
  REQUIRE(read.stats_key);
  CHECK(*read.stats_key == "d.tenant_t-042.op_read|list");
  CHECK(f.limit_of({{"tenant", "t-042"}, {"op", "write"}}) == 8);
  CHECK(f.limit_of({{"tenant", "t-42"}, {"op", "read"}}) == 0);  // no tenant rule for it: nothing applies
  auto user = f.get({{"user", "ann@example.com"}});
  REQUIRE(user.node != nullptr);
  CHECK(user.node->stats_key == "d.user_[a-z]+@example\\.com");
  // Its stats: the pattern is one level of the name, its dots written as stats::level_dot (issue 40).
  CHECK(user.node->stat_name() == "d.user_[a-z]+@example\\\u2024com");
  CHECK(read.node->stat_name() == read.node->stats_key);  // no dot in these patterns
  const auto api = f.get({{"path", "/api/v2/orders"}});
  REQUIRE(api.node != nullptr);
  CHECK(api.node->stats_key == "d.path_/api/.*");
  CHECK(api.node->stat_name() == "d.path_/api/\u2024*");
  CHECK(api.node->limit->stats.total_hits ==
        &f.stats.get_counter("ratelimit.service.rate_limit.d.path_/api/\u2024*.total_hits"));
  REQUIRE(user.stats_key);
  CHECK(*user.stats_key == "d.user_ann@example.com");  // detailed_metric: the request's value
  CHECK(f.limit_of({{"user", "ann@example.org"}}) == 0);
  // A pattern may match the empty value.
  CHECK(f.limit_of({{"empty_ok", ""}}) == 9);
  CHECK(f.limit_of({{"empty_ok", "x"}}) == 9);
  CHECK(f.limit_of({{"empty_ok", "y"}}) == 0);
}

TEST_CASE("value_regex: /rlconfig lists each pattern's rule") {
  fixture f;
  const auto dump = f.rules->dump();
  CHECK(dump.find("d.path_/api/v[0-9]+/users/[0-9]+: unit=SECOND requests_per_unit=3") != std::string::npos);
  CHECK(dump.find("d.tenant_t-[0-9]{3}.op_read|list: unit=HOUR requests_per_unit=7, shadow_mode: true") !=
        std::string::npos);
}

TEST_CASE("value_regex: bad rules are refused, naming the file and the rule") {
  CHECK(load_error("domain: d\ndescriptors:\n  - key: k\n    value_regex: \"a(b\"\n") ==
        "r.yaml: descriptor 'd.k': value_regex 'a(b': missing ): a(b");
  CHECK(load_error("domain: d\ndescriptors:\n  - key: k\n    value: v\n    value_regex: v\n") ==
        "r.yaml: descriptor 'd.k' has both value and value_regex: give one");
  CHECK(load_error("domain: d\ndescriptors:\n  - key: k\n    value_regex: \"\"\n") ==
        "r.yaml: descriptor 'd.k': value_regex is empty");
  const std::string long_pattern(value_regex_set::max_pattern_bytes + 1, 'a');
  CHECK(load_error("domain: d\ndescriptors:\n  - key: k\n    value_regex: " + long_pattern + "\n") ==
        "r.yaml: descriptor 'd.k': value_regex '" + std::string(64, 'a') +
            "\u2026': longer than 1024 bytes (1025)");  // cut: the message does not repeat it all
  CHECK(
      load_error("domain: d\ndescriptors:\n  - key: k\n    value_regex: a*\n    share_threshold: true\n") ==
      "r.yaml: share_threshold is for '*' values; the value_regex rule 'd.k_a*' counts each value it matches "
      "on its own");
  CHECK(load_error(
            "domain: d\ndescriptors:\n  - key: k\n    value_regex: a\n  - key: k\n    value_regex: a\n") ==
        "r.yaml: duplicate descriptor composite key 'd.k_a'");
}

TEST_CASE("value_regex_set: a thousand patterns in one set, the first in order wins") {
  std::vector<std::string> patterns;
  for (int i = 0; i < 1000; ++i) patterns.push_back("user-" + std::to_string(i) + "-[a-z]+");
  patterns.push_back("user-.*");
  std::string error;
  auto set = value_regex_set::build(patterns, error);
  REQUIRE_MESSAGE(set, error);
  CHECK(set->first_match("user-999-abc") == 999);
  CHECK(set->first_match("user-5-x") == 5);
  CHECK(set->first_match("user-5-X") == 1000);
  CHECK(set->first_match("nobody") == -1);
}

}  // namespace value_regex_test
