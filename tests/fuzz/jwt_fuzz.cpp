// libFuzzer: arbitrary bytes as a JWT. An input is used twice: as the token itself (the segment splitting and
// base64url decoding), and split at its first two 0xFF bytes into header JSON, payload JSON and signature
// that are base64url-encoded into a token (so the JSON claim parsing sees arbitrary JSON). Checks: no crash,
// no leak, and a parsed token's signing input is the token's first two segments.
//
// Build and run: scripts/fuzz jwt [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "../support/base64url.hpp"
#include "auth/jwt_token.hpp"

namespace {

using sluice::test::b64url;

void parse(std::string_view token) {
  auto result = sluice::auth::parse_jwt(token);
  if (const auto* jwt = std::get_if<sluice::auth::parsed_jwt>(&result)) {
    if (!token.starts_with(jwt->signing_input)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  parse(bytes);
  const auto first = bytes.find('\xff');
  const auto second = first == std::string_view::npos ? first : bytes.find('\xff', first + 1);
  if (second != std::string_view::npos) {
    const std::string token = b64url(bytes.substr(0, first)) + "." +
                              b64url(bytes.substr(first + 1, second - first - 1)) + "." +
                              b64url(bytes.substr(second + 1));
    parse(token);
    // base64url_decode undoes base64url (unpadded).
    const auto decoded = sluice::auth::base64url_decode(b64url(bytes));
    if (!decoded || *decoded != bytes) std::abort();
  }
  return 0;
}
