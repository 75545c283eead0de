#include "check_config.hpp"

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "backend_choice.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "ratelimit/client/flag_parser.hpp"
#include "ratelimit/config/directory.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "stats/store.hpp"

namespace sluice {

const std::string_view check_config_synopsis =
    "sluice check-config DIR [--merge-domain-config] [--strict] [--limit-tables-dir TABLES] "
    "[--limit-tables-redis]";

namespace {

namespace client = ratelimit::client;

constexpr std::string_view usage_text = R"(
Loads the rate limit rule files in DIR as the server would. Prints the warnings the server would log for them
("warning: <text>"), then "all rate limit configs ok" (exit 0) or "error loading rate limit configs: <file>:
<error>" (exit 1). Exit 2 on a usage error. Flags go before or after DIR, as --flag, --flag=value or
--flag value:
  --merge-domain-config     files of one domain are merged (default: MERGE_DOMAIN_CONFIG)
  --strict                  fail on warnings too
  --limit-tables-dir TABLES the limit tables rules name (limits_from) are loaded from TABLES and checked too
                            ("error loading limit table: <file>:<line>: <error>", exit 1; default:
                            LIMIT_TABLES_DIR)
  --limit-tables-redis      any other table name is a Redis table (default: LIMIT_TABLES_REDIS)
The backend's settings are read as the server reads them (BACKEND_TYPE, REDIS_REGION, ...): a rule whose
algorithm that backend refuses (gcra with REDIS_REGION) is an error here as there, and a rule it cannot count
(gcra, concurrency or count_only_admitted with BACKEND_TYPE=memcache) a warning.
)";

struct check_options {
  bool merge = false;
  bool strict = false;
  // The limit tables rules may name: as the server finds them (LIMIT_TABLES_DIR, LIMIT_TABLES_REDIS).
  std::string tables_dir;
  bool tables_redis = false;
};

const client::flag_spec<check_options> specs[] = {
    {.name = "merge-domain-config", .boolean = &check_options::merge},
    {.name = "strict", .boolean = &check_options::strict},
    {.name = "limit-tables-dir", .text = &check_options::tables_dir},
    {.name = "limit-tables-redis", .boolean = &check_options::tables_redis}};

void print_usage(std::ostream& out) {
  out << "Usage: " << check_config_synopsis << "\n" << usage_text;
}

int usage_error(std::string_view message) {
  std::cerr << "sluice check-config: " << message << "\n\n";
  print_usage(std::cerr);
  return 2;
}

int check(const std::string& dir, const check_options& o, ratelimit::service::limit_tables_settings tables,
          const backend_settings& backend) {
  // What the loaders would log is this report's to say, once: a table's error was printed twice, on stdout
  // and again as a log line on stderr.
  core::log_init(core::log_level::fatal, false);
  std::cout << "checking rate limit configs...\nloading config directory: " << dir << "\n";
  tables.directory = o.tables_dir;
  tables.redis = o.tables_redis;
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
    auto loaded = ratelimit::config::load_rules(files.files, o.merge, scratch, true, &table_source);
    error = std::move(loaded.error);
    if (error.empty() && loaded.rules) {
      auto review = ratelimit::service::review_limits(*loaded.rules, backend_limit_check(backend));
      if (review.refused) error = std::move(*review.refused);
      for (auto& w : review.warnings) loaded.warnings.push_back(std::move(w));
    }
    // The lines the server logs at level warning for these files.
    for (const auto& w : loaded.warnings) std::cout << "warning: " << w << "\n";
    warnings = loaded.warnings.size();
  }
  if (!error.empty()) {
    std::cout << "error loading rate limit configs: " << error << "\n";
    return 1;
  }
  if (o.strict && warnings > 0) {
    std::cout << "error loading rate limit configs: " << warnings
              << (warnings == 1 ? " warning" : " warnings") << " with --strict\n";
    return 1;
  }
  std::cout << "all rate limit configs ok" << (warnings > 0 ? " (with warnings)" : "") << "\n";
  return 0;
}

}  // namespace

int check_config(std::span<const std::string_view> args) {
  check_options o;
  ratelimit::service::limit_tables_settings tables;
  std::optional<backend_settings> backend;
  try {
    const core::env_reader env;
    backend = read_backend_settings(env, ratelimit::read_module_settings(env));
    o.merge = env.get_bool(ratelimit::merge_domain_config_setting());
    o.tables_dir = env.get_string(ratelimit::limit_tables_dir_setting());
    o.tables_redis = env.get_bool(ratelimit::limit_tables_redis_setting());
    tables.max_rows = env.get_uint(ratelimit::limit_tables_max_rows_setting(), 1, 1'000'000'000);
  } catch (const core::settings_error& e) {
    std::cerr << "sluice check-config: " << e.what() << "\n";
    return 2;
  }
  std::vector<std::string_view> operands;
  if (auto stop =
          client::parse_flags(args, std::span<const client::flag_spec<check_options>>(specs), o, &operands)) {
    if (std::holds_alternative<client::help_requested>(*stop)) {
      print_usage(std::cout);
      return 0;
    }
    return usage_error(std::get<std::string>(*stop));
  }
  if (operands.empty()) return usage_error("give the folder of rule files (DIR)");
  if (operands.size() > 1)
    return usage_error(core::cat("unexpected argument '", operands[1], "': check-config takes one DIR"));
  return check(std::string(operands[0]), o, tables, *backend);
}

}  // namespace sluice
