#pragma once
// Public keys from a JSON Web Key Set ({"keys": [...]}) or Google's X.509 map ({"<kid>": "-----BEGIN
// CERTIFICATE-----..."}), as OpenSSL keys tagged with the only algorithm family each may verify.

#include <openssl/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice::auth {

enum class key_family { rsa, ec_p256, ec_p384 };

struct jwk {
  std::string kid;  // may be empty
  std::string alg;  // the JWK's own "alg", empty when absent
  key_family family = key_family::rsa;
  std::shared_ptr<EVP_PKEY> key;
};

struct jwk_set {
  std::vector<jwk> keys;
};

// Keys Sluice cannot use (symmetric "oct", other curves, "use": "enc") are skipped; an error when the
// document is not JSON or no key is usable, so a broken JWKS counts as a failed fetch.
std::variant<jwk_set, std::string> parse_jwks(std::string_view text);

}  // namespace sluice::auth
