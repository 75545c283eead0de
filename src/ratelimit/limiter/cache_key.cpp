#include "ratelimit/limiter/cache_key.hpp"

#include "core/strings.hpp"

namespace sluice::ratelimit::limiter {

namespace {

void append_base(std::string& out, const key_parts& p, std::size_t extra) {
  std::size_t size = p.prefix.size() + p.domain.size() + extra;
  for (const auto& e : p.entries) size += e.key.size() + e.value.size() + 2;
  out.clear();
  out.reserve(size);
  out.append(p.prefix).append(p.domain).push_back('_');
  for (std::size_t i = 0; i < p.entries.size(); ++i) {
    bool shared = i < p.shared_values.size() && !p.shared_values[i].empty();
    out.append(p.entries[i].key).push_back('_');
    out.append(shared ? p.shared_values[i] : p.entries[i].value).push_back('_');
  }
}

void append_number(std::string& out, std::int64_t n) {
  core::append_to(out, n);
}

}  // namespace

void build_cache_key(std::string& out, const key_parts& parts, std::int64_t window_start) {
  append_base(out, parts, 24);
  append_number(out, window_start);
}

void build_tagged_key(std::string& out, const key_parts& parts, std::optional<std::int64_t> window_start,
                      std::string_view tag) {
  // The brace goes first: append_base clears, so it is inserted (the base is short, this is one move).
  append_base(out, parts, 28 + tag.size());
  out.insert(out.begin(), '{');
  out.push_back('}');
  if (window_start) {
    append_number(out, *window_start);
    out.push_back('_');
  }
  out.append(tag);
}

}  // namespace sluice::ratelimit::limiter
