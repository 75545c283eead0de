#include "ratelimit/backends/memory/settings.hpp"

#include "core/strings.hpp"

namespace sluice::ratelimit::backends::memory {

namespace {

constexpr core::setting max_counters{
    "MEMORY_MAX_COUNTERS", "whole number", "2000000",
    "memory backend: the most live counters it holds (about 100 bytes each)"};
constexpr core::setting snapshot_file{
    "MEMORY_SNAPSHOT_FILE", "path", "",
    "memory backend: the counters are written there at stop and read back at "
    "start"};
constexpr core::setting snapshot_interval{
    "MEMORY_SNAPSHOT_INTERVAL", "duration", "0",
    "with MEMORY_SNAPSHOT_FILE: also write it this often (100ms to 24h); 0: "
    "only at stop"};
constexpr core::setting all[]{max_counters, snapshot_file, snapshot_interval};

}  // namespace

std::span<const core::setting> memory_backend_settings() {
  return all;
}

memory_settings read_memory_settings(const core::env_reader& env) {
  memory_settings s;
  s.max_counters = env.get_uint(max_counters, 1024, 1'000'000'000);
  s.snapshot_file = env.get_string(snapshot_file);
  const auto interval = env.get_duration(snapshot_interval);
  if (interval.count() > 0 &&
      (interval < std::chrono::milliseconds{100} || interval > std::chrono::hours{24})) {
    throw core::settings_error(
        core::cat("invalid value '", env.get_string(snapshot_interval),
                  "' for MEMORY_SNAPSHOT_INTERVAL: expected 0 or a duration from 100ms to 24h"));
  }
  s.snapshot_interval = core::to_ms(interval);
  if (s.snapshot_file.empty() && interval.count() > 0)
    throw core::settings_error(
        "MEMORY_SNAPSHOT_INTERVAL needs MEMORY_SNAPSHOT_FILE: set the file, or unset it");
  return s;
}

void refuse_memory_settings(const core::env_reader& env, std::string_view backend_type) {
  // Still checked, as with BACKEND_TYPE=memory: a typo is found before the backend is switched.
  const auto s = read_memory_settings(env);
  if (!s.snapshot_file.empty()) {
    throw core::settings_error(
        core::cat("MEMORY_SNAPSHOT_FILE applies to BACKEND_TYPE=memory only (BACKEND_TYPE is ", backend_type,
                  "): unset it"));
  }
}

}  // namespace sluice::ratelimit::backends::memory
