// libFuzzer: POST /explain's input. The body is parsed as a /json request (api/json_codec.hpp); each of its
// descriptors is explained against a fixed rule file covering every kind of level (exact, wildcard,
// value_regex, key alone, nesting): the walk finds the rule get_limit finds, its path is no longer than the
// descriptor, and the candidates are bounded and each has a reason.
//
// Build and run: scripts/fuzz explain [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/api/json_codec.hpp"
#include "ratelimit/config/rule_explain.hpp"
#include "ratelimit/config/yaml_loader.hpp"

namespace {

namespace config = sluice::ratelimit::config;

void check(bool ok) {
  if (!ok) std::abort();
}

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
  - key: rx
    value_regex: "[a-c]+[0-9]?"
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: parent
    value: p
    rate_limit: {unit: hour, requests_per_unit: 5}
    descriptors:
      - key: child
        rate_limit: {unit: day, requests_per_unit: 6}
        descriptors:
          - key: grandchild
            value: "g*"
            rate_limit: {unit: day, requests_per_unit: 7}
  - key: route
    descriptors:
      - key: method
        value: GET
        rate_limit: {unit: second, requests_per_unit: 8}
)";

const config::rule_set& rules() {
  static sluice::stats::store stats;
  static const auto loaded = [] {
    std::vector<config::config_file> files{{"fuzz.yaml", rules_yaml}};
    auto r = config::load_rules(files, false, stats);
    check(r.rules != nullptr);
    return r.rules;
  }();
  return *loaded;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  sluice::ratelimit::api::rls_request request;
  if (sluice::ratelimit::api::parse_request_json(body, request)) return 0;
  const auto& set = rules();
  const auto* domain = set.find_domain("d");
  check(domain != nullptr);
  for (const auto& d : request.descriptors()) {
    std::vector<config::entry> entries;
    for (const auto& e : d.entries()) entries.push_back({e.key(), e.value()});
    const auto walk = config::explain_match(*domain, entries);
    check(walk.rule == set.get_limit(*domain, entries).node);
    check(walk.path.size() <= entries.size());
    check(!walk.outcome.empty());
    check(walk.candidates.size() <= 8);
    // (not the entry's key: a wildcard matches the composite "key_value", so key "k_exa" with any value takes
    // the rule k / ex*, as upstream's wildcardMatch does)
    for (const auto& level : walk.path) check(level.node != nullptr);
    for (const auto& c : walk.candidates)
      check(c.node != nullptr && !c.why.empty() && c.level <= entries.size());
  }
  return 0;
}
