#include "ratelimit/backends/redis/counter_commands.hpp"

#include <algorithm>
#include <charconv>

namespace sluice::ratelimit::backends::redis {

std::optional<std::uint64_t> counter_value(const sluice::redis::value& v) {
  using kind = sluice::redis::value::kind;
  if (v.type == kind::integer) return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.integer));
  if (v.type == kind::null) return 0;
  if (v.type == kind::bulk_string) {
    std::int64_t out = 0;
    auto [ptr, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), out);
    if (ec == std::errc{} && ptr == v.text.data() + v.text.size())
      return static_cast<std::uint64_t>(std::max<std::int64_t>(0, out));
  }
  return std::nullopt;
}

bool refuses_for_good(std::string_view error_reply) {
  return error_reply.starts_with("WRONGTYPE") || error_reply.starts_with("ERR value is not an integer") ||
         error_reply.starts_with("ERR increment or decrement would overflow");
}

}  // namespace sluice::ratelimit::backends::redis
