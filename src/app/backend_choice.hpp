#pragma once
// Part of the composition root: the one place that names the concrete backends. BACKEND_TYPE chooses one;
// its settings are read with the others at start (each backend reads its own), and its module is started
// (as upstream's runner.go switches over its caches' constructors). The rest of the process sees only
// ratelimit::backends::module.

#include <memory>
#include <string_view>
#include <variant>

#include "core/env.hpp"
#include "core/problem.hpp"
#include "ratelimit/backends/memcache/settings.hpp"
#include "ratelimit/backends/memory/settings.hpp"
#include "ratelimit/backends/module.hpp"
#include "ratelimit/backends/redis/settings.hpp"
#include "ratelimit/service/rules_source.hpp"
#include "ratelimit/settings.hpp"

namespace sluice {

using backend_settings =
    std::variant<ratelimit::backends::redis::redis_settings, ratelimit::backends::memcache::memcache_settings,
                 ratelimit::backends::memory::memory_settings>;

// The chosen backend's settings; a setting of another backend that would do nothing is refused. Throws
// core::settings_error naming the variable.
backend_settings read_backend_settings(const core::env_reader& env, const ratelimit::module_settings& rl);

// What the chosen backend, so set, says of a rule, in the server (from files or xDS) and in `sluice
// check-config` alike. Regions refuse GCRA: such rules do not load. memcached cannot count GCRA, concurrency
// or count_only_admitted: such rules load with a warning, and their requests are answered UNAVAILABLE.
ratelimit::service::rules_source::limit_check backend_limit_check(const backend_settings& settings);

// Starts the chosen backend: connections on the workers' io_contexts, timers on the control thread. Throws
// core::settings_error when it cannot start at all (MEMCACHE_SRV unresolvable, MEMORY_SNAPSHOT_FILE's
// folder).
std::unique_ptr<ratelimit::backends::module> start_backend(const backend_settings& settings,
                                                           const ratelimit::backends::start_context& context);

}  // namespace sluice
