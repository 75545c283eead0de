#include "auth/jwt_token.hpp"

#include <array>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <limits>

namespace sluice::auth {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, 8> alg_names = {"RS256", "RS384", "RS512", "PS256",
                                                       "PS384", "PS512", "ES256", "ES384"};

int base64url_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

std::optional<json::object> parse_object(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

// Reads an optional string claim; false when present with another type.
bool read_string(const json::object& obj, std::string_view name, std::string& out) {
  const auto* v = obj.if_contains(name);
  if (!v) return true;
  if (!v->is_string()) return false;
  out = v->as_string();
  return true;
}

// Reads an optional integral NumericDate; false when present but not an integer.
bool read_time(const json::object& obj, std::string_view name, std::int64_t& out) {
  const auto* v = obj.if_contains(name);
  if (!v) return true;
  if (v->is_int64()) {
    out = v->as_int64();
  } else if (v->is_uint64()) {
    out = std::numeric_limits<std::int64_t>::max();
  } else if (v->is_double() && std::trunc(v->as_double()) == v->as_double() &&
             std::abs(v->as_double()) < 9.2e18) {
    out = static_cast<std::int64_t>(v->as_double());
  } else {
    return false;
  }
  return true;
}

bool read_audiences(const json::object& obj, std::vector<std::string>& out) {
  const auto* v = obj.if_contains("aud");
  if (!v) return true;
  if (v->is_string()) {
    out.emplace_back(v->as_string());
    return true;
  }
  if (!v->is_array()) return false;
  for (const auto& a : v->as_array()) {
    if (!a.is_string()) return false;
    out.emplace_back(a.as_string());
  }
  return true;
}

}  // namespace

std::string_view to_string(jwt_alg alg) {
  return alg_names[static_cast<std::size_t>(alg)];
}

std::optional<jwt_alg> parse_jwt_alg(std::string_view name) {
  for (std::size_t i = 0; i < alg_names.size(); ++i)
    if (alg_names[i] == name) return static_cast<jwt_alg>(i);
  return std::nullopt;
}

std::optional<std::string> base64url_decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = base64url_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::variant<parsed_jwt, std::string_view> parse_jwt(std::string_view token) {
  auto dot1 = token.find('.');
  auto dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos)
    return "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections";

  auto header_text = base64url_decode(token.substr(0, dot1));
  if (!header_text) return "Jwt header is an invalid Base64url encoded";
  auto header = parse_object(*header_text);
  if (!header) return "Jwt header is an invalid JSON";
  parsed_jwt jwt;
  const auto* alg = header->if_contains("alg");
  if (!alg || !alg->is_string()) return "Jwt header [alg] field is required and must be a string";
  auto parsed_alg = parse_jwt_alg(alg->as_string());
  if (!parsed_alg) return "Jwt header [alg] is not supported";
  jwt.alg = *parsed_alg;
  if (!read_string(*header, "kid", jwt.kid)) return "Jwt header [kid] field is not a string";

  auto payload_text = base64url_decode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!payload_text) return "Jwt payload is an invalid Base64url encoded";
  auto payload = parse_object(*payload_text);
  if (!payload) return "Jwt payload is an invalid JSON";
  if (!read_string(*payload, "iss", jwt.issuer)) return "Jwt payload [iss] field is not a string";
  if (!read_string(*payload, "sub", jwt.subject)) return "Jwt payload [sub] field is not a string";
  std::int64_t iat = 0;
  if (!read_time(*payload, "iat", iat)) return "Jwt payload [iat] field is not an integer";
  if (!read_time(*payload, "nbf", jwt.nbf)) return "Jwt payload [nbf] field is not an integer";
  if (!read_time(*payload, "exp", jwt.exp)) return "Jwt payload [exp] field is not an integer";
  if (!read_audiences(*payload, jwt.audiences))
    return "Jwt payload [aud] field is not a string or string list";
  // A non-string email is not an error in ESP: the claim is simply not forwarded as the email.
  if (const auto* email = payload->if_contains("email"); email && email->is_string())
    jwt.email = email->as_string();
  jwt.payload_json = std::move(*payload_text);

  auto signature = base64url_decode(token.substr(dot2 + 1));
  if (!signature) return "Jwt signature is an invalid Base64url encoded";
  jwt.signature = std::move(*signature);
  jwt.signing_input = token.substr(0, dot2);
  return jwt;
}

}  // namespace sluice::auth
