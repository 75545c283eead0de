#pragma once
// Unpadded base64url encoding (RFC 4648 §5), as JWTs and JWKs carry bytes: for tests and fuzz harnesses that
// build tokens. Sluice itself only decodes (auth::base64url_decode).

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::test {

inline std::string b64url(std::string_view in) {
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 63]);
  return out;
}

}  // namespace sluice::test
