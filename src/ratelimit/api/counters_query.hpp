#pragma once
// The counters API's query (docs/guides/operate.md#counters-look-at-reset-set):
// `?domain=D&<entries>[&used=N]`, the entries in one of two forms, never both:
// - `descriptor=k1=v1,k2=v2`, the documented form. A value with a raw '=' is split at ',' and then at each
//   part's first '=' before the parts are percent-decoded, so a key or value holding ',' or '=' is sent
//   escaped (%2C, %3D); '+' stays a plus sign. A value without a raw '=' is what client libraries send
//   (Python's urlencode, Go's url.Values, JavaScript's URLSearchParams escape the whole value): it is decoded
//   whole first and then read the same way, so ',' separates entries there.
// - `entry=k=v`, repeated, one per entry in order: decoded whole as application/x-www-form-urlencoded ('%XX',
//   '+' as a space, as Go's url.ParseQuery), then split at the first '='. Any value can be named this way.
// `domain` and the parameters' names are decoded as form values too. Every other parameter is refused by
// name — a token above all: it is never accepted in a URL (it would land in access logs and browser history).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace sluice::ratelimit::api {

struct counters_query {
  std::string domain;
  std::vector<std::pair<std::string, std::string>> entries;
  std::optional<std::uint64_t> used;
};

// The query of `target` (a request target, "/counters?..."), or what is wrong with it.
std::variant<counters_query, std::string> parse_counters_query(std::string_view target);

// "k1=v1,k2=v2": the descriptor as the query and the answers write it.
std::string descriptor_text(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace sluice::ratelimit::api
