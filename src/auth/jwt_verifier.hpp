#pragma once
// JWT verification as Cloud Endpoints' proxies do it (reference echo-api.md §3–4): RS256/384/512,
// PS256/384/512, ES256/384 signatures against keys from a JWKS (JSON Web Key Set or Google's X.509 map, over
// HTTPS or file://), exp/nbf with 60 s skew, issuer and audience rules with scheme and trailing slash
// ignored. Failures carry ESPv2's status and message. Keys are fetched on the io_context without blocking it.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace sluice::auth {

// One securityDefinitions entry with x-google-issuer / x-google-jwks_uri / x-google-audiences.
struct jwt_provider {
  std::string name;
  std::string issuer;
  std::string jwks_uri;  // https://..., or file:///path for offline use
  std::vector<std::string>
      audiences;  // empty: only "https://<service name>" (and the service name) is accepted
};

struct jwt_claims {
  std::string issuer;
  std::string subject;  // "sub", may be empty
  std::string email;    // may be empty
  std::vector<std::string> audiences;
  std::string payload_json;  // the token's claims object as sent
};

struct jwt_failure {
  unsigned http_status;  // 401, or 403 for a wrong audience
  std::string message;   // ESPv2's text, e.g. "Jwt is expired"
  bool token_present;    // for WWW-Authenticate: `Bearer` vs `Bearer, error="invalid_token"`
};

struct jwt_options {
  std::string service_name;                    // the OpenAPI `host`: an audience always accepted
  std::string extra_ca_file;                   // ECHO_JWKS_CACERT: trusted besides the system CAs
  std::chrono::seconds jwks_cache{300};        // keys are refetched after this
  std::chrono::seconds skew{60};               // allowed clock skew for exp / nbf
  std::size_t verified_cache_entries = 10000;  // verified tokens, kept until exp
};

class jwt_verifier {
 public:
  jwt_verifier(boost::asio::any_io_executor ex, jwt_options options);
  ~jwt_verifier();

  // Verifies `token` against any one of `providers` (alternatives). Runs on the caller's executor.
  boost::asio::awaitable<std::variant<jwt_claims, jwt_failure>> verify(
      std::string_view token, std::span<const jwt_provider> providers);

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace sluice::auth
