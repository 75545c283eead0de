#pragma once
// Process-wide logger with upstream's two formats: logrus text (time="..." level=... msg="...") and, with
// LOG_FORMAT=json, one object per line with @timestamp, @message and level. Thread-safe; writes to stderr.

#include <atomic>
#include <optional>
#include <string_view>

#include "core/strings.hpp"

#include "core/setting.hpp"

namespace sluice::core {

enum class log_level { panic = 0, fatal, error, warn, info, debug, trace };

// logrus level names, case-insensitive ("warn" and "warning" are the same level).
std::optional<log_level> parse_log_level(std::string_view s);
// LOG_LEVEL's declaration: the process and the stdout stats sink read it.
inline constexpr setting log_level_setting{"LOG_LEVEL", "panic|fatal|error|warn|info|debug|trace", "warn",
                                           "the least severe log lines written (any case)"};

namespace detail {
extern std::atomic<int> current_log_level;
}

void log_init(log_level level, bool json);
inline bool log_enabled(log_level level) {
  return static_cast<int>(level) <= detail::current_log_level.load(std::memory_order_relaxed);
}
void log_write(log_level level, std::string_view msg);

template <typename... Args>
void log_error(const Args&... args) {
  if (log_enabled(log_level::error)) log_write(log_level::error, cat(args...));
}
template <typename... Args>
void log_warn(const Args&... args) {
  if (log_enabled(log_level::warn)) log_write(log_level::warn, cat(args...));
}
template <typename... Args>
void log_info(const Args&... args) {
  if (log_enabled(log_level::info)) log_write(log_level::info, cat(args...));
}
template <typename... Args>
void log_debug(const Args&... args) {
  if (log_enabled(log_level::debug)) log_write(log_level::debug, cat(args...));
}

}  // namespace sluice::core
