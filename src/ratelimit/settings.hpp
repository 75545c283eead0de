#pragma once
// The rate limit module's settings, read once from the environment with upstream's names and defaults
// (reference §1). Anything invalid throws core::settings_error naming the variable.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/env.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/rlqs/settings.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/service/service.hpp"
#include "ratelimit/xds/client.hpp"

namespace sluice::ratelimit {

struct module_settings {
  // BACKEND_TYPE: redis | memcache | memory. Each backend reads its own settings
  // (backends/<name>/settings.hpp).
  std::string backend_type = "redis";
  bool force_start_without_initial_config = false;  // FORCE_START_WITHOUT_INITIAL_CONFIG
  std::size_t top_descriptors_capacity = 256;  // TOP_DESCRIPTORS_CAPACITY: per list, worker, 10 s; 0: off
  bool top_descriptors_hash_values = false;    // TOP_DESCRIPTORS_VALUES=hash (default show)
  service::rules_source_settings rules;        // the rule files (CONFIG_TYPE lists FILE) and the sources
  std::optional<xds::client_settings> xds;     // the xDS server, when CONFIG_TYPE lists GRPC_XDS_SOTW
  service::limit_tables_settings tables;       // LIMIT_TABLES_*
  service::settings service;
  limiter::settings limiter;
  rlqs::settings rlqs;  // RLQS_*
  // Settings accepted that do nothing as given: logged at warning once logging is set up.
  std::vector<std::string> warnings;
};

module_settings read_module_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp); RLQS_* and xDS's are rlqs_settings() and xds_settings().
std::span<const core::setting> module_settings_list();
// Those `sluice check-config` reads as the server does.
const core::setting& merge_domain_config_setting();
const core::setting& limit_tables_dir_setting();
const core::setting& limit_tables_redis_setting();
const core::setting& limit_tables_max_rows_setting();

}  // namespace sluice::ratelimit
