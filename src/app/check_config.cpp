#include "check_config.hpp"

#include <iostream>
#include <string>
#include <string_view>

#include "core/env.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "stats/store.hpp"

namespace sluice {

namespace {

constexpr std::string_view usage = "usage: sluice check-config DIR [--merge-domain-config] [--strict]\n";

}  // namespace

int check_config(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << usage;
    return 2;
  }
  std::string dir = argv[2];
  bool merge = core::env_reader().get_bool("MERGE_DOMAIN_CONFIG", false);
  bool strict = false;
  for (int i = 3; i < argc; ++i) {
    const std::string_view option = argv[i];
    if (option == "--merge-domain-config") {
      merge = true;
    } else if (option == "--strict") {
      strict = true;
    } else {
      std::cerr << "unknown option " << option << "\n" << usage;
      return 2;
    }
  }
  std::cout << "checking rate limit configs...\nloading config directory: " << dir << "\n";
  auto files = ratelimit::config::read_rule_files(dir, "", false);
  std::string error = files.error;
  std::size_t warnings = 0;
  if (error.empty()) {
    stats::store scratch;
    auto loaded = ratelimit::config::load_rules(files.files, merge, scratch);
    // The lines the server logs at level warning for these files.
    for (const auto& w : loaded.warnings) std::cout << "warning: " << w << "\n";
    warnings = loaded.warnings.size();
    error = std::move(loaded.error);
  }
  if (!error.empty()) {
    std::cout << "error loading rate limit configs: " << error << "\n";
    return 1;
  }
  if (strict && warnings > 0) {
    std::cout << "error loading rate limit configs: " << warnings
              << (warnings == 1 ? " warning" : " warnings") << " with --strict\n";
    return 1;
  }
  std::cout << "all rate limit configs ok" << (warnings > 0 ? " (with warnings)" : "") << "\n";
  return 0;
}

}  // namespace sluice
