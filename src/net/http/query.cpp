#include "net/http/query.hpp"

#include "core/strings.hpp"

namespace sluice::net::http {

std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  auto q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  if (auto fragment = query.find('#'); fragment != std::string_view::npos) query = query.substr(0, fragment);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name)
      return core::percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

}  // namespace sluice::net::http
