#pragma once
// The rate limit module's settings, read once from the environment with upstream's names and defaults
// (reference §1). Anything invalid throws core::settings_error naming the variable.

#include <cstddef>
#include <string>

#include "core/env.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/service/service.hpp"

namespace sluice::ratelimit {

struct module_settings {
  std::string backend_type = "redis";               // BACKEND_TYPE: redis | memcache | memory
  bool force_start_without_initial_config = false;  // FORCE_START_WITHOUT_INITIAL_CONFIG
  std::size_t memory_max_counters = 2'000'000;      // MEMORY_MAX_COUNTERS
  service::rules_source_settings rules;
  service::settings service;
  limiter::settings limiter;
};

module_settings read_module_settings(const core::env_reader& env);

}  // namespace sluice::ratelimit
