#pragma once
// Reads the Cloud Endpoints OpenAPI (Swagger 2.0) document users of the echo sample already have, and turns
// it into the routes Sluice serves: per operation its handler, whether it needs an API key, and which JWT
// providers it accepts. Anything Sluice could not serve the way ESP would is an error, never ignored.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "auth/jwt_verifier.hpp"

namespace sluice::echo {

enum class operation_kind { echo, auth_info };

struct operation {
  std::string method;  // upper case: GET, POST
  std::string path;    // basePath + the document's path
  std::string operation_id;
  operation_kind kind = operation_kind::echo;
  bool api_key = false;
  std::vector<auth::jwt_provider> jwt_providers;  // any one of them; empty: no token needed
};

struct openapi_document {
  std::string service_name;  // `host`
  std::vector<operation> operations;
};

class openapi_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws openapi_error saying what is wrong (without the file name).
openapi_document parse_openapi(std::string_view yaml_text);
// Throws openapi_error "<file>: <what is wrong>".
openapi_document load_openapi_file(const std::string& file);

}  // namespace sluice::echo
