#include "auth/jwks.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <optional>

#include "auth/jwt_token.hpp"
#include "core/strings.hpp"

namespace sluice::auth {

namespace json = boost::json;

namespace {

template <auto Free>
struct deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using bignum_ptr = std::unique_ptr<BIGNUM, deleter<BN_free>>;
using param_bld_ptr = std::unique_ptr<OSSL_PARAM_BLD, deleter<OSSL_PARAM_BLD_free>>;
using params_ptr = std::unique_ptr<OSSL_PARAM, deleter<OSSL_PARAM_free>>;
using pkey_ctx_ptr = std::unique_ptr<EVP_PKEY_CTX, deleter<EVP_PKEY_CTX_free>>;
using bio_ptr = std::unique_ptr<BIO, deleter<BIO_free>>;
using x509_ptr = std::unique_ptr<X509, deleter<X509_free>>;

std::shared_ptr<EVP_PKEY> own(EVP_PKEY* key) {
  return key ? std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free) : nullptr;
}

bignum_ptr to_bignum(const std::string& bytes) {
  return bignum_ptr(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                              static_cast<int>(bytes.size()), nullptr));
}

std::shared_ptr<EVP_PKEY> from_params(const char* type, OSSL_PARAM_BLD* bld) {
  params_ptr params(OSSL_PARAM_BLD_to_param(bld));
  pkey_ctx_ptr ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0) return nullptr;
  EVP_PKEY* key = nullptr;
  if (EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) <= 0) return nullptr;
  return own(key);
}

std::optional<std::string> member_bytes(const json::object& obj, std::string_view name) {
  const auto* v = obj.if_contains(name);
  if (!v || !v->is_string()) return std::nullopt;
  return base64url_decode(v->as_string());
}

std::shared_ptr<EVP_PKEY> rsa_key(const json::object& obj) {
  auto n = member_bytes(obj, "n");
  auto e = member_bytes(obj, "e");
  if (!n || !e || n->empty() || e->empty()) return nullptr;
  auto bn_n = to_bignum(*n);
  auto bn_e = to_bignum(*e);
  param_bld_ptr bld(OSSL_PARAM_BLD_new());
  if (!bn_n || !bn_e || !bld || !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()))
    return nullptr;
  return from_params("RSA", bld.get());
}

// The point must lie on the curve: OpenSSL checks that when it decodes the uncompressed form 04||x||y.
std::shared_ptr<EVP_PKEY> ec_key(const json::object& obj, key_family& family) {
  const auto* crv = obj.if_contains("crv");
  if (!crv || !crv->is_string()) return nullptr;
  std::size_t size = 0;
  const char* group = nullptr;
  if (crv->as_string() == "P-256") {
    size = 32, group = "P-256", family = key_family::ec_p256;
  } else if (crv->as_string() == "P-384") {
    size = 48, group = "P-384", family = key_family::ec_p384;
  } else {
    return nullptr;
  }
  auto x = member_bytes(obj, "x");
  auto y = member_bytes(obj, "y");
  if (!x || !y || x->size() > size || y->size() > size) return nullptr;
  // RFC 7518 wants full-size coordinates, but some writers (PyJWT before 2.8, for one) drop leading zero
  // bytes, as jwt_verify_lib tolerates: put them back.
  x->insert(0, size - x->size(), '\0');
  y->insert(0, size - y->size(), '\0');
  std::string point = "\x04" + *x + *y;
  param_bld_ptr bld(OSSL_PARAM_BLD_new());
  if (!bld || !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()))
    return nullptr;
  return from_params("EC", bld.get());
}

std::optional<jwk> from_jwk(const json::value& v) {
  if (!v.is_object()) return std::nullopt;
  const auto& obj = v.as_object();
  jwk key;
  if (const auto* use = obj.if_contains("use"); use && use->is_string() && use->as_string() != "sig")
    return std::nullopt;
  if (const auto* kid = obj.if_contains("kid"); kid && kid->is_string()) key.kid = kid->as_string();
  if (const auto* alg = obj.if_contains("alg"); alg && alg->is_string()) key.alg = alg->as_string();
  const auto* kty = obj.if_contains("kty");
  if (!kty || !kty->is_string()) return std::nullopt;
  if (kty->as_string() == "RSA") {
    key.family = key_family::rsa;
    key.key = rsa_key(obj);
  } else if (kty->as_string() == "EC") {
    key.key = ec_key(obj, key.family);
  }
  if (!key.key) return std::nullopt;
  return key;
}

std::optional<key_family> family_of(EVP_PKEY* key) {
  if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA) return key_family::rsa;
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return std::nullopt;
  char name[64];
  std::size_t len = 0;
  if (!EVP_PKEY_get_group_name(key, name, sizeof name, &len)) return std::nullopt;
  std::string_view group(name, len);
  if (group == "prime256v1" || group == "P-256") return key_family::ec_p256;
  if (group == "secp384r1" || group == "P-384") return key_family::ec_p384;
  return std::nullopt;
}

std::optional<jwk> from_certificate(std::string_view kid, const json::value& v) {
  if (!v.is_string()) return std::nullopt;
  const auto& pem = v.as_string();
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return std::nullopt;
  x509_ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return std::nullopt;
  jwk key;
  key.kid = kid;
  key.key = own(X509_get_pubkey(cert.get()));
  if (!key.key) return std::nullopt;
  auto family = family_of(key.key.get());
  if (!family) return std::nullopt;
  key.family = *family;
  return key;
}

}  // namespace

std::variant<jwk_set, std::string> parse_jwks(std::string_view text) {
  boost::system::error_code ec;
  json::value doc = json::parse(text, ec);
  if (ec) return core::cat("JWKS is not valid JSON: ", ec.message());
  if (!doc.is_object()) return std::string("JWKS is not a JSON object");
  jwk_set set;
  const auto& obj = doc.as_object();
  if (const auto* keys = obj.if_contains("keys"); keys && keys->is_array()) {
    for (const auto& k : keys->as_array())
      if (auto key = from_jwk(k)) set.keys.push_back(std::move(*key));
  } else {
    for (const auto& [kid, cert] : obj)
      if (auto key = from_certificate(kid, cert)) set.keys.push_back(std::move(*key));
  }
  if (set.keys.empty()) return std::string("JWKS has no usable RSA or EC P-256/P-384 public key");
  return set;
}

}  // namespace sluice::auth
