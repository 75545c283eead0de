#pragma once
// Signature checks for the accepted algorithms. The key's family must match the algorithm, which is what
// prevents algorithm confusion (an RSA key is never used for ES*, nor an EC key of the wrong curve).

#include <string_view>

#include "auth/jwks.hpp"
#include "auth/jwt_token.hpp"

namespace sluice::auth {

// True when `key` may verify a token signed with `alg` (family, and the JWK's own "alg" when it has one).
bool key_fits(const jwk& key, jwt_alg alg);

// `signature` as in the token: PKCS#1 v1.5 or PSS bytes for RS/PS, JOSE raw r||s for ES.
bool verify_signature(const jwk& key, jwt_alg alg, std::string_view signing_input,
                      std::string_view signature);

}  // namespace sluice::auth
