#pragma once
// securityDefinitions and `security` requirements of a Swagger 2.0 document, read the way Cloud Endpoints
// does (reference echo-api.md §1): apiKey schemes make a key required, oauth2 schemes with x-google-issuer
// are JWT providers, OR between JWT providers is allowed, OR with an API key is not.

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <string_view>

#include "auth/jwt_verifier.hpp"
#include "echo/openapi.hpp"

namespace sluice::echo {

struct security_scheme {
  bool api_key = false;         // else a JWT provider
  auth::jwt_provider provider;  // for JWT schemes
};

struct security_context {
  std::map<std::string, security_scheme, std::less<>> schemes;
  YAML::Node top_level;  // the document's `security`, used by operations without their own
};

// Throws openapi_error for a definition Sluice cannot honour.
security_context read_security_definitions(const YAML::Node& definitions);

// Sets op.api_key and op.jwt_providers from `requirement` (a list of alternatives, each a map of scheme
// names); `where` prefixes errors ("GET /path: ").
void apply_security(const YAML::Node& requirement, const security_context& context, std::string_view where,
                    operation& op);

}  // namespace sluice::echo
