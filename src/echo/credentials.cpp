#include "echo/credentials.hpp"

#include <cctype>

#include "core/strings.hpp"
#include "net/http/query.hpp"

namespace sluice::echo {

std::optional<std::string> bearer_token(const net::http::request& req) {
  constexpr std::string_view scheme = "Bearer ";
  auto it = req.find(boost::beast::http::field::authorization);
  if (it != req.end()) {
    std::string_view value = it->value();
    // The auth scheme is case-insensitive (RFC 9110 §11.1).
    if (value.size() > scheme.size() && core::iequals(value.substr(0, scheme.size()), scheme))
      return std::string(value.substr(scheme.size()));
  }
  return net::http::query_param(req.target(), "access_token");
}

std::optional<std::string> api_key(const net::http::request& req) {
  if (auto key = net::http::query_param(req.target(), "key")) return key;
  if (auto key = net::http::query_param(req.target(), "api_key")) return key;
  if (auto it = req.find("x-api-key"); it != req.end()) return std::string(it->value());
  return std::nullopt;
}

}  // namespace sluice::echo
