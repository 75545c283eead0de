#include "core/log.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <string>

#include "core/strings.hpp"

namespace sluice::core {

namespace detail {
std::atomic<int> current_log_level{static_cast<int>(log_level::warn)};
}

namespace {

std::atomic<bool> json_format{false};

constexpr std::string_view level_name(log_level l) {
  switch (l) {
    case log_level::panic:
      return "panic";
    case log_level::fatal:
      return "fatal";
    case log_level::error:
      return "error";
    case log_level::warn:
      return "warning";
    case log_level::info:
      return "info";
    case log_level::debug:
      return "debug";
    case log_level::trace:
      return "trace";
  }
  return "unknown";
}

// RFC 3339 with nanoseconds, UTC: 2026-11-22T06:33:27.123456789Z.
std::string timestamp() {
  auto now = std::chrono::system_clock::now();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lldZ", static_cast<long long>(ns % 1'000'000'000));
  return buf;
}

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    if (append_short_escape(out, c)) continue;
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

}  // namespace

std::optional<log_level> parse_log_level(std::string_view s) {
  const std::string l = ascii_lower(s);
  if (l == "panic") return log_level::panic;
  if (l == "fatal") return log_level::fatal;
  if (l == "error") return log_level::error;
  if (l == "warn" || l == "warning") return log_level::warn;
  if (l == "info") return log_level::info;
  if (l == "debug") return log_level::debug;
  if (l == "trace") return log_level::trace;
  return std::nullopt;
}

void log_init(log_level level, bool json) {
  detail::current_log_level.store(static_cast<int>(level), std::memory_order_relaxed);
  json_format.store(json, std::memory_order_relaxed);
}

void log_write(log_level level, std::string_view msg) {
  std::string line;
  line.reserve(msg.size() + 96);
  if (json_format.load(std::memory_order_relaxed)) {
    line += "{\"@message\":";
    append_quoted(line, msg);
    line += ",\"@timestamp\":\"";
    line += timestamp();
    line += "\",\"level\":\"";
    line += level_name(level);
    line += "\"}\n";
  } else {
    line += "time=\"";
    line += timestamp();
    line += "\" level=";
    line += level_name(level);
    line += " msg=";
    append_quoted(line, msg);
    line += '\n';
  }
  // One write per line keeps lines whole when several threads log at once.
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace sluice::core
