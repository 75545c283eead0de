#include "check_config.hpp"

#include <iostream>
#include <string>
#include <string_view>

#include "core/env.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "stats/store.hpp"

namespace sluice {

namespace {

constexpr std::string_view usage =
    "usage: sluice check-config DIR [--merge-domain-config] [--strict] [--limit-tables-dir TABLES] "
    "[--limit-tables-redis]\n";

}  // namespace

int check_config(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << usage;
    return 2;
  }
  std::string dir = argv[2];
  const core::env_reader env;
  bool merge = env.get_bool("MERGE_DOMAIN_CONFIG", false);
  bool strict = false;
  // The limit tables rules may name: as the server finds them (LIMIT_TABLES_DIR, LIMIT_TABLES_REDIS).
  ratelimit::service::limit_tables_settings tables;
  tables.directory = env.get_string("LIMIT_TABLES_DIR", "");
  tables.redis = env.get_bool("LIMIT_TABLES_REDIS", false);
  tables.max_rows = env.get_uint("LIMIT_TABLES_MAX_ROWS", tables.max_rows, 1, 1'000'000'000);
  for (int i = 3; i < argc; ++i) {
    const std::string_view option = argv[i];
    if (option == "--merge-domain-config") {
      merge = true;
    } else if (option == "--strict") {
      strict = true;
    } else if (option == "--limit-tables-dir" && i + 1 < argc) {
      tables.directory = argv[++i];
    } else if (option == "--limit-tables-redis") {
      tables.redis = true;
    } else {
      std::cerr << "unknown option " << option << "\n" << usage;
      return 2;
    }
  }
  std::cout << "checking rate limit configs...\nloading config directory: " << dir << "\n";
  stats::store scratch;
  ratelimit::service::limit_tables_source table_source(tables, nullptr, scratch);
  if (!tables.directory.empty()) {
    std::cout << "loading limit tables: " << tables.directory << "\n";
    const auto report = table_source.load();
    for (const auto& e : report.errors) std::cout << "error loading limit table: " << e << "\n";
    if (!report.errors.empty()) return 1;
  }
  auto files = ratelimit::config::read_rule_files(dir, "", false);
  std::string error = files.error;
  std::size_t warnings = 0;
  if (error.empty()) {
    auto loaded = ratelimit::config::load_rules(files.files, merge, scratch, true, &table_source);
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
