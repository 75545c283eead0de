#pragma once
// Compiles a YAML rule file for unit tests, failing the test on a load error.

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "ratelimit/config/yaml_loader.hpp"

namespace sluice::test {

inline std::shared_ptr<const ratelimit::config::rule_set> compile_rules(const std::string& yaml,
                                                                        stats::store& stats) {
  std::vector<ratelimit::config::config_file> files{{"test.yaml", yaml}};
  auto r = ratelimit::config::load_rules(files, false, stats);
  REQUIRE_MESSAGE(r.rules != nullptr, r.error);
  return r.rules;
}

}  // namespace sluice::test
