#include "echo/credentials.hpp"

#include <cctype>

#include "net/http/query.hpp"

namespace sluice::echo {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

std::optional<std::string> bearer_token(const net::http::request& req) {
  constexpr std::string_view scheme = "Bearer ";
  auto it = req.find(boost::beast::http::field::authorization);
  if (it != req.end()) {
    std::string_view value = it->value();
    // The auth scheme is case-insensitive (RFC 9110 §11.1).
    if (value.size() > scheme.size() && iequals(value.substr(0, scheme.size()), scheme))
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
