#include "echo/credentials.hpp"

#include <cctype>

namespace sluice::echo {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A malformed escape is kept as it is, so the value still fails the check it is meant for.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    int hi = s[i] == '%' && i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
    if (lo >= 0) {
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

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
      return percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::optional<std::string> bearer_token(const net::http::request& req) {
  constexpr std::string_view scheme = "Bearer ";
  auto it = req.find(boost::beast::http::field::authorization);
  if (it != req.end()) {
    std::string_view value = it->value();
    // The auth scheme is case-insensitive (RFC 9110 §11.1).
    if (value.size() > scheme.size() && iequals(value.substr(0, scheme.size()), scheme))
      return std::string(value.substr(scheme.size()));
  }
  return query_param(req.target(), "access_token");
}

std::optional<std::string> api_key(const net::http::request& req) {
  if (auto key = query_param(req.target(), "key")) return key;
  if (auto key = query_param(req.target(), "api_key")) return key;
  if (auto it = req.find("x-api-key"); it != req.end()) return std::string(it->value());
  return std::nullopt;
}

}  // namespace sluice::echo
