// JWT verification end to end through jwt_verifier, with keys generated here and JWKS files in a temp dir.

#include <doctest/doctest.h>

#include "auth/jwks.hpp"
#include "auth/jwt_verifier.hpp"
#include "jwt_fixture.hpp"

namespace {

using namespace jwt_test;
using sluice::auth::jwt_claims;
using sluice::auth::jwt_failure;
using sluice::auth::jwt_provider;

struct fixture {
  temp_dir dir;
  boost::asio::io_context io;
  // Made once: RSA key generation dominates the run time otherwise.
  static inline const key_ptr rsa = rsa_key();
  static inline const key_ptr p256 = ec_key("P-256");
  static inline const key_ptr p384 = ec_key("P-384");
  std::string uri = dir.write("jwks.json", jwks({jwk_json(rsa.get(), "rsa1"), jwk_json(p256.get(), "ec256"),
                                                 jwk_json(p384.get(), "ec384")}));
  sluice::auth::jwt_verifier verifier{io.get_executor(), options()};

  static sluice::auth::jwt_options options() {
    sluice::auth::jwt_options o;
    o.service_name = "echo-api.endpoints.p.cloud.goog";
    return o;
  }

  std::vector<jwt_provider> providers() const { return {{"google_jwt", issuer, uri, {audience}}}; }
  verdict verify(const std::string& token) { return run_verify(io, verifier, token, providers()); }
  verdict verify(const std::string& token, std::vector<jwt_provider> p) {
    return run_verify(io, verifier, token, p);
  }
};

std::string failure_of(const verdict& v) {
  return std::holds_alternative<jwt_failure>(v) ? std::get<jwt_failure>(v).message : "OK";
}
unsigned status_of(const verdict& v) {
  return std::holds_alternative<jwt_failure>(v) ? std::get<jwt_failure>(v).http_status : 200;
}

}  // namespace

TEST_CASE_FIXTURE(fixture, "a valid RS256 token yields its claims") {
  auto payload = claims();
  auto v = verify(token(rsa.get(), "RS256", "rsa1", payload));
  REQUIRE(failure_of(v) == "OK");
  const auto& c = std::get<jwt_claims>(v);
  CHECK(c.issuer == issuer);
  CHECK(c.subject == "12345678");
  CHECK(c.email == "user@example.com");
  CHECK(c.audiences == std::vector<std::string>{audience});
  CHECK(c.payload_json == payload);
}

TEST_CASE_FIXTURE(fixture, "every accepted algorithm verifies with the right key type") {
  for (const char* alg : {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
    CHECK_MESSAGE(failure_of(verify(token(rsa.get(), alg, "rsa1", claims()))) == "OK", alg);
  CHECK(failure_of(verify(token(p256.get(), "ES256", "ec256", claims()))) == "OK");
  CHECK(failure_of(verify(token(p384.get(), "ES384", "ec384", claims()))) == "OK");
}

TEST_CASE_FIXTURE(fixture, "malformed tokens get jwt_verify_lib's messages") {
  const std::string good = token(rsa.get(), "RS256", "rsa1", claims());
  const auto dot = good.find('.');
  CHECK(failure_of(verify("abc")) ==
        "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections");
  CHECK(failure_of(verify(good + ".x")) ==
        "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections");
  CHECK(failure_of(verify("%%%" + good.substr(dot))) == "Jwt header is an invalid Base64url encoded");
  CHECK(failure_of(verify(b64url("not json") + good.substr(dot))) == "Jwt header is an invalid JSON");
  CHECK(failure_of(verify(b64url(R"({"typ":"JWT"})") + good.substr(dot))) ==
        "Jwt header [alg] field is required and must be a string");
  CHECK(failure_of(verify(b64url(R"({"alg":"RS256"})") + ".e30=.!!")) ==
        "Jwt signature is an invalid Base64url encoded");
  CHECK(failure_of(verify(b64url(R"({"alg":"RS256"})") + "." + b64url("[1]") + ".AA")) ==
        "Jwt payload is an invalid JSON");
  CHECK(failure_of(verify(b64url(R"({"alg":"RS256"})") + ".*.AA")) ==
        "Jwt payload is an invalid Base64url encoded");
  CHECK(failure_of(verify(b64url(R"({"alg":"RS256"})") + "." + b64url(R"({"exp":"soon"})") + ".AA")) ==
        "Jwt payload [exp] field is not an integer");
  auto v = verify("abc");
  CHECK(status_of(v) == 401);
  CHECK(std::get<jwt_failure>(v).token_present);
}

TEST_CASE_FIXTURE(fixture, "an empty token is missing, not invalid") {
  auto v = verify("");
  REQUIRE(status_of(v) == 401);
  CHECK(std::get<jwt_failure>(v).message == "Jwt is missing");
  CHECK_FALSE(std::get<jwt_failure>(v).token_present);
}

TEST_CASE_FIXTURE(fixture, "padded base64url segments are accepted (old clients pad)") {
  auto padded = [](std::string s) { return s + std::string((4 - s.size() % 4) % 4, '='); };
  std::string t = padded(b64url(R"({"alg":"RS256","kid":"rsa1"})")) + "." + padded(b64url(claims()));
  CHECK(failure_of(verify(t + "." + padded(b64url(sign(rsa.get(), "RS256", t))))) == "OK");
}

TEST_CASE_FIXTURE(fixture, "alg none, HS256 and unknown algorithms are refused") {
  std::string payload = b64url(claims());
  CHECK(failure_of(verify(b64url(R"({"alg":"none"})") + "." + payload + ".")) ==
        "Jwt header [alg] is not supported");
  // The classic confusion attack: HMAC keyed with the verifier's RSA public key.
  std::string input = b64url(R"({"alg":"HS256","kid":"rsa1"})") + "." + payload;
  std::string pem = public_pem(rsa.get());
  unsigned char mac[32];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), pem.data(), static_cast<int>(pem.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &mac_len);
  auto v = verify(input + "." + b64url(std::string(reinterpret_cast<char*>(mac), mac_len)));
  CHECK(failure_of(v) == "Jwt header [alg] is not supported");
  CHECK(status_of(v) == 401);
  CHECK(failure_of(verify(b64url(R"({"alg":"ES512"})") + "." + payload + ".AA")) ==
        "Jwt header [alg] is not supported");
  CHECK(failure_of(verify(b64url(R"({"alg":"EdDSA"})") + "." + payload + ".AA")) ==
        "Jwt header [alg] is not supported");
}

TEST_CASE_FIXTURE(fixture, "the key type must match the algorithm") {
  // An ES256 header naming the RSA key, an RS256 header naming an EC key, ES384 naming the P-256 key.
  CHECK(failure_of(verify(token(p256.get(), "ES256", "rsa1", claims()))) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "ec256", claims()))) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
  CHECK(failure_of(verify(token(p256.get(), "ES384", "ec256", claims()))) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
  // A JWK that pins its own alg is not used for another one.
  std::string pinned = dir.write("pinned.json", jwks({jwk_json(rsa.get(), "rsa1", "RS256")}));
  std::vector<jwt_provider> p = {{"p", issuer, pinned, {audience}}};
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims()), p)) == "OK");
  CHECK(failure_of(verify(token(rsa.get(), "PS256", "rsa1", claims()), p)) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
}

TEST_CASE_FIXTURE(fixture, "bad signatures fail verification") {
  std::string t = token(rsa.get(), "RS256", "rsa1", claims());
  t[t.size() - 5] = t[t.size() - 5] == 'A' ? 'B' : 'A';
  CHECK(failure_of(verify(t)) == "Jwt verification fails");
  // Signed by a key that is not in the set, under a kid that is.
  auto other = rsa_key();
  CHECK(failure_of(verify(token(other.get(), "RS256", "rsa1", claims()))) == "Jwt verification fails");
  auto other_ec = ec_key("P-256");
  CHECK(failure_of(verify(token(other_ec.get(), "ES256", "ec256", claims()))) == "Jwt verification fails");
  // A payload swapped under a valid signature.
  std::string good = token(rsa.get(), "RS256", "rsa1", claims());
  std::string forged =
      good.substr(0, good.find('.') + 1) + b64url(claims(R"(,"admin":true)")) + good.substr(good.rfind('.'));
  auto v = verify(forged);
  CHECK(failure_of(v) == "Jwt verification fails");
  CHECK(status_of(v) == 401);
}

TEST_CASE_FIXTURE(fixture, "exp and nbf allow 60 s of clock skew") {
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims("", -120)))) == "Jwt is expired");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims("", -30)))) == "OK");
  auto nbf = [](std::int64_t offset) { return sluice::core::cat(R"(,"nbf":)", now() + offset); };
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims(nbf(120))))) == "Jwt not yet valid");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims(nbf(30))))) == "OK");
}

TEST_CASE_FIXTURE(fixture, "exp and nbf at the ends of the int64 range: no overflow with the skew") {
  auto with = [&](std::string_view times) {
    auto claims = sluice::core::cat(R"({"aud":")", audience, R"(","iss":")", issuer, R"(",)", times, "}");
    return failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims)));
  };
  CHECK(with(R"("exp":9223372036854775807)") == "OK");  // wrapped, it read as long expired
  CHECK(with(R"("exp":-9223372036854775808)") == "Jwt is expired");
  CHECK(with(R"("exp":9223372036854775807,"nbf":9223372036854775807)") == "Jwt not yet valid");
  CHECK(with(R"("exp":9223372036854775807,"nbf":-9223372036854775808)") == "OK");
}

TEST_CASE_FIXTURE(fixture, "the issuer must be one of the providers', scheme and trailing slash ignored") {
  auto with_iss = [&](std::string_view iss) {
    return sluice::core::cat(R"({"exp":)", now() + 600, R"(,"aud":")", audience, R"(","iss":")", iss,
                             R"("})");
  };
  CHECK(failure_of(verify(
            token(rsa.get(), "RS256", "rsa1", with_iss("https://" + std::string(issuer) + "/")))) == "OK");
  auto v = verify(token(rsa.get(), "RS256", "rsa1", with_iss("evil.example.com")));
  CHECK(failure_of(v) == "Jwt issuer is not configured");
  CHECK(status_of(v) == 401);
  std::string no_iss = sluice::core::cat(R"({"exp":)", now() + 600, R"(,"aud":")", audience, R"("})");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", no_iss))) == "Jwt issuer is not configured");
  std::vector<jwt_provider> https_provider = {{"p", "https://" + std::string(issuer) + "/", uri, {audience}}};
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", with_iss(issuer)), https_provider)) == "OK");
}

TEST_CASE_FIXTURE(fixture, "audiences: the provider's, or the service name; otherwise 403") {
  auto with_aud = [&](std::string_view aud_json) {
    return sluice::core::cat(R"({"exp":)", now() + 600, R"(,"iss":")", issuer, R"(","aud":)", aud_json, "}");
  };
  auto check = [&](std::string_view aud_json) {
    return failure_of(verify(token(rsa.get(), "RS256", "rsa1", with_aud(aud_json))));
  };
  CHECK(check(R"("https://echo.endpoints.sample.google.com/")") == "OK");
  CHECK(check(R"(["other", "echo.endpoints.sample.google.com"])") == "OK");
  CHECK(check(R"("echo-api.endpoints.p.cloud.goog")") == "OK");
  CHECK(check(R"("https://echo-api.endpoints.p.cloud.goog")") == "OK");
  CHECK(check(R"("other")") == "Audiences in Jwt are not allowed");
  CHECK(check(R"([])") == "Audiences in Jwt are not allowed");
  CHECK(check(R"(42)") == "Jwt payload [aud] field is not a string or string list");
  auto v = verify(token(rsa.get(), "RS256", "rsa1", with_aud(R"("other")")));
  CHECK(status_of(v) == 403);
  std::string no_aud = sluice::core::cat(R"({"exp":)", now() + 600, R"(,"iss":")", issuer, R"("})");
  CHECK(status_of(verify(token(rsa.get(), "RS256", "rsa1", no_aud))) == 403);
  // No x-google-audiences: only the service name.
  std::vector<jwt_provider> p = {{"p", issuer, uri, {}}};
  CHECK(failure_of(verify(
            token(rsa.get(), "RS256", "rsa1", with_aud(R"("echo.endpoints.sample.google.com")")), p)) ==
        "Audiences in Jwt are not allowed");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", with_aud(R"("echo-api.endpoints.p.cloud.goog")")),
                          p)) == "OK");
}

TEST_CASE_FIXTURE(fixture, "providers are alternatives: the one whose issuer matches is used") {
  std::string other_uri = dir.write("other.json", jwks({jwk_json(rsa_key().get(), "x")}));
  std::vector<jwt_provider> p = {{"id", "https://accounts.google.com", other_uri, {"client-id"}},
                                 {"jwt", issuer, uri, {audience}}};
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims()), p)) == "OK");
}

TEST_CASE_FIXTURE(fixture, "without a kid, every key of the right type is tried") {
  auto second = rsa_key();
  std::string two =
      dir.write("two.json", jwks({jwk_json(rsa_key().get(), "a"), jwk_json(second.get(), "b")}));
  std::vector<jwt_provider> p = {{"p", issuer, two, {audience}}};
  CHECK(failure_of(verify(token(second.get(), "RS256", "", claims()), p)) == "OK");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "", claims()), p)) == "Jwt verification fails");
  CHECK(failure_of(verify(token(p256.get(), "ES256", "", claims()), p)) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
}

TEST_CASE_FIXTURE(fixture, "Google's X.509 certificate map is a key set") {
  std::string map = sluice::core::cat(R"({"k1": ")", certificate_pem(rsa.get()), R"(", "k2": ")",
                                      certificate_pem(p256.get()), R"("})");
  for (std::size_t at = map.find('\n'); at != std::string::npos; at = map.find('\n', at))
    map.replace(at, 1, "\\n");
  std::vector<jwt_provider> p = {{"p", issuer, dir.write("x509.json", map), {audience}}};
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "k1", claims()), p)) == "OK");
  CHECK(failure_of(verify(token(p256.get(), "ES256", "k2", claims()), p)) == "OK");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "k3", claims()), p)) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
}

TEST_CASE_FIXTURE(fixture, "a JWKS that cannot be read or used is a failed fetch") {
  auto check = [&](const std::string& jwks_uri) {
    std::vector<jwt_provider> p = {{"p", issuer, jwks_uri, {audience}}};
    auto v = verify(token(rsa.get(), "RS256", "rsa1", claims()), p);
    CHECK(status_of(v) == 401);
    return failure_of(v);
  };
  CHECK(check("file:///nonexistent/jwks.json") == "Jwks remote fetch is failed");
  CHECK(check(dir.write("bad.json", "{not json")) == "Jwks remote fetch is failed");
  CHECK(check(dir.write("oct.json", R"({"keys":[{"kty":"oct","k":"c2VjcmV0"}]})")) ==
        "Jwks remote fetch is failed");
  CHECK(check("http://127.0.0.1:1/jwks") == "Jwks remote fetch is failed");
  CHECK(check("https://127.0.0.1:1/jwks") == "Jwks remote fetch is failed");
}

TEST_CASE_FIXTURE(fixture, "an unknown kid refetches the key set once, picking up rotated keys") {
  auto rotated = rsa_key();
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims()))) == "OK");
  dir.write("jwks.json", jwks({jwk_json(rsa.get(), "rsa1"), jwk_json(rotated.get(), "rsa2")}));
  CHECK(failure_of(verify(token(rotated.get(), "RS256", "rsa2", claims()))) == "OK");
  // Rate-limited: a second rotation within 30 s is not seen until the cache expires.
  auto third = rsa_key();
  dir.write("jwks.json", jwks({jwk_json(third.get(), "rsa3")}));
  CHECK(failure_of(verify(token(third.get(), "RS256", "rsa3", claims()))) ==
        "Jwks doesn't have key to match kid or alg from Jwt");
  CHECK(failure_of(verify(token(rsa.get(), "RS256", "rsa1", claims("", 1800)))) == "OK");
}

TEST_CASE_FIXTURE(fixture, "verified tokens are served from the cache") {
  std::string t = token(rsa.get(), "RS256", "rsa1", claims());
  CHECK(failure_of(verify(t)) == "OK");
  // The cache is keyed by the providers too: a different audience list is checked afresh.
  std::vector<jwt_provider> p = {{"google_jwt", issuer, uri, {"someone-else"}}};
  CHECK(failure_of(verify(t, p)) == "Audiences in Jwt are not allowed");
  CHECK(failure_of(verify(t)) == "OK");
}

TEST_CASE("an EC JWK whose coordinates were written without their leading zero bytes still verifies") {
  // About one P-256 key in 128 has an x that starts with a zero byte; PyJWT 2.6 writes it one byte short.
  key_ptr key;
  for (int i = 0; i < 5000 && !key; ++i) {
    auto candidate = ec_key("P-256");
    if (bn_param(candidate.get(), OSSL_PKEY_PARAM_EC_PUB_X).size() < 32) key = candidate;
  }
  REQUIRE(key);
  const std::string short_jwk =
      sluice::core::cat(R"({"kty":"EC","crv":"P-256","kid":"short","x":")",
                        b64url(bn_param(key.get(), OSSL_PKEY_PARAM_EC_PUB_X)), R"(","y":")",
                        b64url(bn_param(key.get(), OSSL_PKEY_PARAM_EC_PUB_Y)), R"("})");
  auto parsed = sluice::auth::parse_jwks(jwks({short_jwk}));
  REQUIRE(std::holds_alternative<sluice::auth::jwk_set>(parsed));
  CHECK(std::get<sluice::auth::jwk_set>(parsed).keys.size() == 1);
  // A coordinate longer than the curve's is still refused.
  const std::string long_jwk =
      sluice::core::cat(R"({"kty":"EC","crv":"P-256","kid":"long","x":")",
                        b64url(std::string(1, '\1') + bn_param(key.get(), OSSL_PKEY_PARAM_EC_PUB_X, 32)),
                        R"(","y":")", b64url(bn_param(key.get(), OSSL_PKEY_PARAM_EC_PUB_Y, 32)), R"("})");
  CHECK(std::holds_alternative<std::string>(sluice::auth::parse_jwks(jwks({long_jwk}))));
}
