#pragma once
// Compiles a YAML rule file for unit tests, failing the test on a load error; and a fixture matching against
// it.

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "ratelimit/config/yaml_loader.hpp"

namespace sluice::test {

inline std::shared_ptr<const ratelimit::config::rule_set> compile_rules(const std::string& yaml,
                                                                        stats::store& stats) {
  std::vector<ratelimit::config::config_file> files{{"test.yaml", yaml}};
  auto r = ratelimit::config::load_rules(files, false, stats);
  REQUIRE_MESSAGE(r.rules != nullptr, r.error);
  return r.rules;
}

// A rule file compiled, and get_limit on its domain "d".
struct matcher_fixture {
  explicit matcher_fixture(const std::string& yaml)
      : rules(compile_rules(yaml, stats)), domain(*rules->find_domain("d")) {}

  ratelimit::config::match get(std::vector<ratelimit::config::entry> entries) const {
    return rules->get_limit(domain, entries);
  }
  // The matched rule's requests_per_unit; 0 when no limit applies.
  std::uint32_t limit_of(std::vector<ratelimit::config::entry> entries) const {
    auto m = get(std::move(entries));
    return m.node == nullptr ? 0 : m.node->limit->requests_per_unit;
  }

  stats::store stats;
  std::shared_ptr<const ratelimit::config::rule_set> rules;
  const ratelimit::config::descriptor_node& domain;
};

}  // namespace sluice::test
