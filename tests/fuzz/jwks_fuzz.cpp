// libFuzzer: JWKS documents. An input is used twice: as the document itself, and split at its 0xFF bytes into
// byte strings that the harness puts into a document as an EC key's coordinates (P-256 or P-384), an RSA
// key's modulus and exponent (base64url), and an X.509 certificate (PEM, in Google's {"kid": "<PEM>"} form).
// Checks: no crash, no leak, no exception; an accepted set is non-empty and each key is an OpenSSL key of the
// family it is tagged with; and the keys built from the input hold exactly the input's numbers (EC
// coordinates padded to the curve's size, RSA numbers without leading zero bytes).
//
// Build and run: scripts/fuzz jwks [seconds]

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../support/base64url.hpp"
#include "auth/jwks.hpp"

namespace {

using namespace sluice::auth;
using sluice::test::b64url;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string group_of(EVP_PKEY* key) {
  char name[64];
  std::size_t len = 0;
  if (!EVP_PKEY_get_group_name(key, name, sizeof name, &len)) return {};
  return std::string(name, len);
}

void check_family(const jwk& key) {
  check(key.key != nullptr);
  EVP_PKEY* k = key.key.get();
  switch (key.family) {
    case key_family::rsa:
      check(EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA);
      break;
    case key_family::ec_p256:
      check(EVP_PKEY_get_base_id(k) == EVP_PKEY_EC);
      check(group_of(k) == "prime256v1" || group_of(k) == "P-256");
      break;
    case key_family::ec_p384:
      check(EVP_PKEY_get_base_id(k) == EVP_PKEY_EC);
      check(group_of(k) == "secp384r1" || group_of(k) == "P-384");
      break;
  }
}

const jwk* find_kid(const jwk_set& set, std::string_view kid) {
  for (const auto& k : set.keys)
    if (k.kid == kid) return &k;
  return nullptr;
}

// The big-endian bytes of `number` without leading zeros.
std::string bignum_bytes(EVP_PKEY* key, const char* param) {
  BIGNUM* bn = nullptr;
  check(EVP_PKEY_get_bn_param(key, param, &bn) == 1);
  std::string out(static_cast<std::size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(out.data()));
  BN_free(bn);
  return out;
}

std::string_view without_leading_zeros(std::string_view s) {
  while (!s.empty() && s.front() == '\0') s.remove_prefix(1);
  return s;
}

std::string pem_certificate(std::string_view der) {
  std::string b64(4 * ((der.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                      reinterpret_cast<const unsigned char*>(der.data()), static_cast<int>(der.size()));
  b64.resize(static_cast<std::size_t>(n));
  std::string pem = "-----BEGIN CERTIFICATE-----\\n";
  for (std::size_t i = 0; i < b64.size(); i += 64) pem += b64.substr(i, 64) + "\\n";
  return pem + "-----END CERTIFICATE-----\\n";
}

void built(const std::vector<std::string_view>& parts) {
  const bool p384 = !parts[0].empty() && (static_cast<unsigned char>(parts[0][0]) & 1) != 0;
  const std::string doc = R"({"keys":[{"kty":"EC","kid":"ec","crv":")" +
                          std::string(p384 ? "P-384" : "P-256") + R"(","x":")" + b64url(parts[0]) +
                          R"(","y":")" + b64url(parts[1]) +
                          R"("},{"kty":"RSA","kid":"rsa","use":"sig","n":")" + b64url(parts[2]) +
                          R"(","e":")" + b64url(parts[3]) + R"("}]})";
  const auto result = parse_jwks(doc);
  if (const auto* set = std::get_if<jwk_set>(&result)) {
    for (const auto& k : set->keys) check_family(k);
    if (const jwk* ec = find_kid(*set, "ec")) {
      const std::size_t size = p384 ? 48 : 32;
      check(ec->family == (p384 ? key_family::ec_p384 : key_family::ec_p256));
      check(parts[0].size() <= size && parts[1].size() <= size);
      const std::string expected = "\x04" + std::string(size - parts[0].size(), '\0') +
                                   std::string(parts[0]) + std::string(size - parts[1].size(), '\0') +
                                   std::string(parts[1]);
      unsigned char point[1 + 2 * 48];
      std::size_t len = 0;
      check(EVP_PKEY_get_octet_string_param(ec->key.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point,
                                            sizeof point, &len) == 1);
      check(std::string_view(reinterpret_cast<const char*>(point), len) == expected);
    }
    if (const jwk* rsa = find_kid(*set, "rsa")) {
      check(rsa->family == key_family::rsa);
      check(bignum_bytes(rsa->key.get(), OSSL_PKEY_PARAM_RSA_N) == without_leading_zeros(parts[2]));
      check(bignum_bytes(rsa->key.get(), OSSL_PKEY_PARAM_RSA_E) == without_leading_zeros(parts[3]));
    }
  } else {
    check(!std::get<std::string>(result).empty());
  }

  const auto certificates = parse_jwks(R"({"cert":")" + pem_certificate(parts[4]) + R"("})");
  if (const auto* set = std::get_if<jwk_set>(&certificates)) {
    check(set->keys.size() == 1 && set->keys[0].kid == "cert");
    check_family(set->keys[0]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto result = parse_jwks(bytes);
  if (const auto* set = std::get_if<jwk_set>(&result)) {
    check(!set->keys.empty());
    for (const auto& k : set->keys) check_family(k);
  } else {
    check(!std::get<std::string>(result).empty());
  }

  std::vector<std::string_view> parts;
  std::string_view rest = bytes;
  while (parts.size() < 4) {
    const auto cut = rest.find('\xff');
    if (cut == std::string_view::npos) break;
    parts.push_back(rest.substr(0, cut));
    rest.remove_prefix(cut + 1);
  }
  if (parts.size() == 4) {
    parts.push_back(rest);
    built(parts);
  }
  return 0;
}
