#pragma once
// Test keys and tokens made with OpenSSL: RSA and EC keys, their JWKs and certificates, and signed JWTs.

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include "../../support/base64url.hpp"
#include "../../support/temp_dir.hpp"
#include "auth/jwt_verifier.hpp"
#include "core/strings.hpp"

namespace jwt_test {

using key_ptr = std::shared_ptr<EVP_PKEY>;

using sluice::test::b64url;

inline key_ptr rsa_key() {
  return key_ptr(EVP_RSA_gen(2048), EVP_PKEY_free);
}
inline key_ptr ec_key(const char* curve) {
  return key_ptr(EVP_EC_gen(curve), EVP_PKEY_free);
}

inline std::string bn_param(EVP_PKEY* key, const char* name, std::size_t pad = 0) {
  BIGNUM* bn = nullptr;
  if (!EVP_PKEY_get_bn_param(key, name, &bn)) throw std::runtime_error("EVP_PKEY_get_bn_param");
  std::string out(std::max<std::size_t>(pad, static_cast<std::size_t>(BN_num_bytes(bn))), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

// A JWK (public part only) as JSON text.
inline std::string jwk_json(EVP_PKEY* key, std::string_view kid, std::string_view alg = "") {
  std::string extra = alg.empty() ? "" : sluice::core::cat(R"(,"alg":")", alg, '"');
  if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA)
    return sluice::core::cat(R"({"kty":"RSA","kid":")", kid, R"(","n":")",
                             b64url(bn_param(key, OSSL_PKEY_PARAM_RSA_N)), R"(","e":")",
                             b64url(bn_param(key, OSSL_PKEY_PARAM_RSA_E)), '"', extra, "}");
  std::size_t size = EVP_PKEY_get_bits(key) == 256 ? 32 : 48;
  return sluice::core::cat(R"({"kty":"EC","crv":")", size == 32 ? "P-256" : "P-384", R"(","kid":")", kid,
                           R"(","x":")", b64url(bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, size)), R"(","y":")",
                           b64url(bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, size)), '"', extra, "}");
}

inline std::string public_pem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_PUBKEY(bio.get(), key);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

// A self-signed certificate for Google's X.509 map format.
inline std::string certificate_pem(EVP_PKEY* key) {
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_set_pubkey(cert.get(), key);
  auto* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("test"), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  X509_sign(cert.get(), key, EVP_sha256());
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(bio.get(), cert.get());
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

inline const EVP_MD* digest(std::string_view alg) {
  if (alg.ends_with("384")) return EVP_sha384();
  if (alg.ends_with("512")) return EVP_sha512();
  return EVP_sha256();
}

// Signs like a JOSE library: PKCS#1 v1.5 / PSS for RS / PS, raw r||s for ES.
inline std::string sign(EVP_PKEY* key, std::string_view alg, std::string_view input) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  EVP_DigestSignInit(ctx.get(), &pctx, digest(alg), nullptr, key);
  if (alg.starts_with("PS")) {
    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING);
    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST);
  }
  std::size_t len = 0;
  auto data = reinterpret_cast<const unsigned char*>(input.data());
  EVP_DigestSign(ctx.get(), nullptr, &len, data, input.size());
  std::string sig(len, '\0');
  EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, data, input.size());
  sig.resize(len);
  if (!alg.starts_with("ES")) return sig;
  std::size_t half = alg == "ES256" ? 32 : 48;
  auto der = reinterpret_cast<const unsigned char*>(sig.data());
  ECDSA_SIG* parsed = d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(sig.size()));
  std::string raw(2 * half, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(parsed), reinterpret_cast<unsigned char*>(raw.data()),
               static_cast<int>(half));
  BN_bn2binpad(ECDSA_SIG_get0_s(parsed), reinterpret_cast<unsigned char*>(raw.data() + half),
               static_cast<int>(half));
  ECDSA_SIG_free(parsed);
  return raw;
}

inline std::string signed_token(EVP_PKEY* key, std::string_view alg, std::string_view header,
                                std::string_view payload) {
  std::string input = b64url(header) + "." + b64url(payload);
  return input + "." + b64url(sign(key, alg, input));
}

// A token as google-auth writes it: {"typ":"JWT","alg":..,"kid":..}; no kid member when `kid` is empty.
inline std::string token(EVP_PKEY* key, std::string_view alg, std::string_view kid,
                         std::string_view payload) {
  std::string header = sluice::core::cat(R"({"typ":"JWT","alg":")", alg, '"');
  if (!kid.empty()) header += sluice::core::cat(R"(,"kid":")", kid, '"');
  return signed_token(key, alg, header + "}", payload);
}

inline std::int64_t now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr const char* issuer = "jwt-client.endpoints.sample.google.com";
constexpr const char* audience = "echo.endpoints.sample.google.com";

// The sample client's claims, with `extra` JSON members appended (or replacing nothing: keep names unique).
inline std::string claims(std::string_view extra = "", std::int64_t exp_offset = 3600) {
  return sluice::core::cat(R"({"iat":)", now(), R"(,"exp":)", now() + exp_offset, R"(,"aud":")", audience,
                           R"(","iss":")", issuer, R"(","sub":"12345678","email":"user@example.com")", extra,
                           "}");
}

struct temp_dir : sluice::testing::temp_dir {
  temp_dir() : sluice::testing::temp_dir("sluice-jwt") {}
  // Writes `text` to `name` and returns its file:// URI.
  std::string write(const std::string& name, const std::string& text) const {
    return "file://" + sluice::testing::temp_dir::write(name, text).string();
  }
};

inline std::string jwks(std::initializer_list<std::string> keys) {
  std::string out = R"({"keys":[)";
  for (const auto& k : keys) out += (out.back() == '[' ? "" : ",") + k;
  return out + "]}";
}

using verdict = std::variant<sluice::auth::jwt_claims, sluice::auth::jwt_failure>;

// Runs one verification to completion on a private io_context.
inline verdict run_verify(boost::asio::io_context& io, sluice::auth::jwt_verifier& verifier,
                          std::string token, std::vector<sluice::auth::jwt_provider> providers) {
  auto future = boost::asio::co_spawn(
      io, [&]() -> boost::asio::awaitable<verdict> { co_return co_await verifier.verify(token, providers); },
      boost::asio::use_future);
  io.restart();
  io.run();
  return future.get();
}

}  // namespace jwt_test
