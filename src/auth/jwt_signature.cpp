#include "auth/jwt_signature.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <memory>
#include <string>

namespace sluice::auth {

namespace {

const EVP_MD* digest_of(jwt_alg alg) {
  switch (alg) {
    case jwt_alg::rs256:
    case jwt_alg::ps256:
    case jwt_alg::es256:
      return EVP_sha256();
    case jwt_alg::rs384:
    case jwt_alg::ps384:
    case jwt_alg::es384:
      return EVP_sha384();
    case jwt_alg::rs512:
    case jwt_alg::ps512:
      return EVP_sha512();
  }
  return nullptr;
}

key_family family_of(jwt_alg alg) {
  switch (alg) {
    case jwt_alg::es256:
      return key_family::ec_p256;
    case jwt_alg::es384:
      return key_family::ec_p384;
    default:
      return key_family::rsa;
  }
}

bool is_pss(jwt_alg alg) {
  return alg == jwt_alg::ps256 || alg == jwt_alg::ps384 || alg == jwt_alg::ps512;
}

// JOSE sends ECDSA signatures as fixed-size r||s; OpenSSL wants DER.
std::string ecdsa_der(std::string_view raw, std::size_t half) {
  if (raw.size() != 2 * half) return {};
  auto bytes = reinterpret_cast<const unsigned char*>(raw.data());
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(ECDSA_SIG_new(), ECDSA_SIG_free);
  BIGNUM* r = BN_bin2bn(bytes, static_cast<int>(half), nullptr);
  BIGNUM* s = BN_bin2bn(bytes + half, static_cast<int>(half), nullptr);
  if (!sig || !r || !s || !ECDSA_SIG_set0(sig.get(), r, s)) {
    BN_free(r);
    BN_free(s);
    return {};
  }
  unsigned char* der = nullptr;
  int len = i2d_ECDSA_SIG(sig.get(), &der);
  if (len <= 0) return {};
  std::string out(reinterpret_cast<char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  return out;
}

}  // namespace

bool key_fits(const jwk& key, jwt_alg alg) {
  return key.family == family_of(alg) && (key.alg.empty() || key.alg == to_string(alg));
}

bool verify_signature(const jwk& key, jwt_alg alg, std::string_view signing_input,
                      std::string_view signature) {
  if (!key_fits(key, alg)) return false;
  std::string der;
  if (key.family != key_family::rsa) {
    der = ecdsa_der(signature, key.family == key_family::ec_p256 ? 32 : 48);
    if (der.empty()) return false;
    signature = der;
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), &pctx, digest_of(alg), nullptr, key.key.get()) <= 0)
    return false;
  // RFC 7518 §3.5: PSS with MGF1 over the same hash and a salt as long as the hash.
  if (is_pss(alg) && (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) <= 0 ||
                      EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) <= 0 ||
                      EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, digest_of(alg)) <= 0))
    return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(signing_input.data()),
                          signing_input.size()) == 1;
}

}  // namespace sluice::auth
