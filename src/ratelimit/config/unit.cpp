#include "ratelimit/config/unit.hpp"

#include <array>
#include <cctype>
#include <utility>

#include "core/strings.hpp"

namespace sluice::ratelimit::config {

namespace {

constexpr std::array<std::pair<std::string_view, unit>, 7> names{{
    {"SECOND", unit::second},
    {"MINUTE", unit::minute},
    {"HOUR", unit::hour},
    {"DAY", unit::day},
    {"WEEK", unit::week},
    {"MONTH", unit::month},
    {"YEAR", unit::year},
}};

}  // namespace

std::optional<unit> parse_unit(std::string_view name) {
  for (auto [n, u] : names) {
    if (core::iequals(name, n)) return u;
  }
  return std::nullopt;
}

std::string_view unit_name(unit u) {
  for (auto [n, v] : names) {
    if (v == u) return n;
  }
  return "UNKNOWN";
}

std::int64_t unit_seconds(unit u) {
  switch (u) {
    case unit::second:
      return 1;
    case unit::minute:
      return 60;
    case unit::hour:
      return 3600;
    case unit::day:
      return 86400;
    case unit::week:
      return 604800;
    case unit::month:
      return 2592000;
    case unit::year:
      return 31536000;
    case unit::unknown:
      return 0;
  }
  return 0;
}

}  // namespace sluice::ratelimit::config
