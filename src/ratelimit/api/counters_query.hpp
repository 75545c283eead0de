#pragma once
// The counters API's query (README "Operating Sluice"): `?domain=D&descriptor=k1=v1,k2=v2[&used=N]`. The
// descriptor is split at ',' and '=' before its parts are percent-decoded, so a key or value holding one of
// them is sent escaped (%2C, %3D). Every other parameter is refused by name — a token above all: it is
// never accepted in a URL (it would land in access logs and browser history).

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
