#pragma once
// Splitting and decoding a compact JWT (header.payload.signature) the way jwt_verify_lib does, with its
// messages: nothing here checks signatures, times or audiences.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice::auth {

enum class jwt_alg { rs256, rs384, rs512, ps256, ps384, ps512, es256, es384 };

std::string_view to_string(jwt_alg alg);
// Only asymmetric algorithms: `none` and HS* are refused, so a public key can never act as an HMAC secret.
std::optional<jwt_alg> parse_jwt_alg(std::string_view name);

struct parsed_jwt {
  jwt_alg alg = jwt_alg::rs256;
  std::string kid;                 // empty: try every key that fits `alg`
  std::string_view signing_input;  // "header.payload", a view into the token
  std::string signature;
  std::string payload_json;
  std::string issuer;
  std::string subject;
  std::string email;
  std::vector<std::string> audiences;
  std::int64_t exp = 0;  // 0: absent
  std::int64_t nbf = 0;  // 0: absent
};

// Standard base64url, with or without '=' padding (old clients pad). nullopt on any other character.
std::optional<std::string> base64url_decode(std::string_view in);

// The parsed token, or jwt_verify_lib's message for the first problem found.
std::variant<parsed_jwt, std::string_view> parse_jwt(std::string_view token);

}  // namespace sluice::auth
