#include "ratelimit/limiter/cache_key.hpp"

#include <charconv>

namespace sluice::ratelimit::limiter {

void build_cache_key(std::string& out, std::string_view prefix, std::string_view domain,
                     std::span<const config::entry> entries, std::span<const std::string_view> shared_values,
                     std::int64_t window_start) {
  std::size_t size = prefix.size() + domain.size() + 24;
  for (const auto& e : entries) size += e.key.size() + e.value.size() + 2;
  out.clear();
  out.reserve(size);
  out.append(prefix).append(domain).push_back('_');
  for (std::size_t i = 0; i < entries.size(); ++i) {
    bool shared = i < shared_values.size() && !shared_values[i].empty();
    out.append(entries[i].key).push_back('_');
    out.append(shared ? shared_values[i] : entries[i].value).push_back('_');
  }
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, window_start);
  out.append(buf, static_cast<std::size_t>(end - buf));
}

}  // namespace sluice::ratelimit::limiter
