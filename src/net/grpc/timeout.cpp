#include "net/grpc/timeout.hpp"

#include <cstdint>

namespace sluice::net::grpc {

std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view text) {
  if (text.size() < 2 || text.size() > 9) return std::nullopt;
  std::int64_t value = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  using namespace std::chrono;
  // At most 99,999,999 hours: as nanoseconds that overflows, so cap the long units.
  constexpr std::int64_t max_hours = duration_cast<hours>(nanoseconds::max()).count() - 1;
  switch (text.back()) {
    case 'H':
      return value > max_hours ? nanoseconds::max() : nanoseconds(hours(value));
    case 'M':
      return value > max_hours * 60 ? nanoseconds::max() : nanoseconds(minutes(value));
    case 'S':
      return nanoseconds(seconds(value));
    case 'm':
      return nanoseconds(milliseconds(value));
    case 'u':
      return nanoseconds(microseconds(value));
    case 'n':
      return nanoseconds(value);
    default:
      return std::nullopt;
  }
}

}  // namespace sluice::net::grpc
