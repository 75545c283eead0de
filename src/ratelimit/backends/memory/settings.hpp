#pragma once
// BACKEND_TYPE=memory: its settings (MEMORY_*), read once from the environment. Anything invalid throws
// core::settings_error naming the variable.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/env.hpp"

namespace sluice::ratelimit::backends::memory {

struct memory_settings {
  std::size_t max_counters = 2'000'000;            // MEMORY_MAX_COUNTERS
  std::string snapshot_file;                       // MEMORY_SNAPSHOT_FILE: "" = none
  std::chrono::milliseconds snapshot_interval{0};  // MEMORY_SNAPSHOT_INTERVAL: 0 = only at stop
};

memory_settings read_memory_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp).
std::span<const core::setting> memory_backend_settings();
// With another BACKEND_TYPE: refuses the settings that would do nothing there.
void refuse_memory_settings(const core::env_reader& env, std::string_view backend_type);

}  // namespace sluice::ratelimit::backends::memory
