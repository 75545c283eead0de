// The OpenAPI loader: the shipped sample document, and one document per error Sluice must refuse.

#include "echo/openapi.hpp"

#include <doctest/doctest.h>

#include <string>

#include "source_paths.hpp"

namespace {

using namespace sluice::echo;

// A valid document; tests replace parts of it.
const std::string definitions = R"(
securityDefinitions:
  api_key: {type: apiKey, name: key, in: query}
  jwt_a:
    type: oauth2
    flow: implicit
    authorizationUrl: ""
    x-google-issuer: "issuer-a"
    x-google-jwks_uri: "file:///tmp/a.json"
    x-google-audiences: "aud1, aud2,,"
  jwt_b: {type: oauth2, x-google-issuer: "https://issuer-b", x-google-jwks_uri: "https://b/keys"}
)";

std::string doc(const std::string& paths, const std::string& extra = "") {
  return "swagger: \"2.0\"\nhost: svc.example\n" + extra + "paths:\n" + paths + definitions;
}

std::string error_of(const std::string& text) {
  try {
    parse_openapi(text);
  } catch (const openapi_error& e) {
    return e.what();
  }
  return "";
}

std::string auth_route(const std::string& security) {
  return "  /auth/info/x:\n    get:\n      operationId: x\n      security:\n" + security;
}

}  // namespace

TEST_CASE("openapi: the shipped sample document") {
  auto d = load_openapi_file(SLUICE_ETC_DIR "/echo/openapi.yaml");
  CHECK(d.service_name == "echo-api.endpoints.YOUR-PROJECT-ID.cloud.goog");
  REQUIRE(d.operations.size() == 3);
  const operation& echo = d.operations[0];
  CHECK(echo.method == "POST");
  CHECK(echo.path == "/echo");
  CHECK(echo.operation_id == "echo");
  CHECK(echo.kind == operation_kind::echo);
  CHECK(echo.api_key);
  CHECK(echo.jwt_providers.empty());

  const operation& jwt = d.operations[1];
  CHECK(jwt.method == "GET");
  CHECK(jwt.path == "/auth/info/googlejwt");
  CHECK(jwt.operation_id == "auth_info_google_jwt");
  CHECK(jwt.kind == operation_kind::auth_info);
  CHECK(jwt.api_key);  // the sample's `- api_key` / `- google_jwt` list means key AND token
  REQUIRE(jwt.jwt_providers.size() == 1);
  CHECK(jwt.jwt_providers[0].name == "google_jwt");
  CHECK(jwt.jwt_providers[0].issuer == "jwt-client.endpoints.sample.google.com");
  CHECK(jwt.jwt_providers[0].jwks_uri ==
        "https://www.googleapis.com/service_accounts/v1/jwk/YOUR-SERVICE-ACCOUNT-EMAIL");
  CHECK(jwt.jwt_providers[0].audiences == std::vector<std::string>{"echo.endpoints.sample.google.com"});

  const operation& id = d.operations[2];
  CHECK(id.path == "/auth/info/googleidtoken");
  CHECK(id.operation_id == "authInfoGoogleIdToken");
  CHECK(id.api_key);
  REQUIRE(id.jwt_providers.size() == 1);
  CHECK(id.jwt_providers[0].issuer == "https://accounts.google.com");
  CHECK(id.jwt_providers[0].jwks_uri == "https://www.googleapis.com/oauth2/v3/certs");
  CHECK(id.jwt_providers[0].audiences == std::vector<std::string>{"YOUR-CLIENT-ID"});
}

TEST_CASE("openapi: security forms Sluice serves") {
  SUBCASE("AND in one requirement, OR between JWTs, comma-separated audiences") {
    auto d = parse_openapi(
        doc(auth_route("        - {api_key: [], jwt_a: []}\n        - {api_key: [], jwt_b: []}\n")));
    REQUIRE(d.operations.size() == 1);
    CHECK(d.operations[0].api_key);
    REQUIRE(d.operations[0].jwt_providers.size() == 2);
    CHECK(d.operations[0].jwt_providers[0].audiences == std::vector<std::string>{"aud1", "aud2"});
    CHECK(d.operations[0].jwt_providers[1].audiences.empty());
  }
  SUBCASE("JWT only") {
    auto d = parse_openapi(doc(auth_route("        - jwt_a: []\n        - jwt_b: []\n")));
    CHECK_FALSE(d.operations[0].api_key);
    CHECK(d.operations[0].jwt_providers.size() == 2);
  }
  SUBCASE("top-level security applies unless the operation has its own; [] turns it off") {
    auto d =
        parse_openapi(doc("  /echo:\n    post: {operationId: echo}\n"
                          "  /auth/info/a:\n    get: {operationId: a, security: [jwt_a: []]}\n"
                          "  /auth/info/b:\n    get: {operationId: b, security: []}\n",
                          "security:\n  - api_key: []\n"));
    REQUIRE(d.operations.size() == 3);
    CHECK(d.operations[0].api_key);
    CHECK_FALSE(d.operations[1].api_key);
    CHECK(d.operations[1].jwt_providers.size() == 1);
    CHECK_FALSE(d.operations[2].api_key);
    CHECK(d.operations[2].jwt_providers.empty());
  }
  SUBCASE("basePath prefixes every path") {
    auto d = parse_openapi(doc("  /echo:\n    post: {operationId: echo}\n", "basePath: /v1/\n"));
    CHECK(d.operations[0].path == "/v1/echo");
  }
  SUBCASE("a path may hold several operations") {
    auto d = parse_openapi(
        doc("  /auth/info/x:\n    get: {operationId: x}\n    parameters: []\n    x-extra: 1\n"));
    CHECK(d.operations.size() == 1);
  }
}

TEST_CASE("openapi: documents Sluice cannot serve") {
  const std::string echo = "  /echo:\n    post: {operationId: echo, security: [api_key: []]}\n";
  CHECK(error_of("openapi: 3.0.0\n") ==
        "OpenAPI 3 documents are not supported; Cloud Endpoints reads Swagger 2.0 (swagger: \"2.0\")");
  CHECK(error_of("swagger: \"1.2\"\n") == "not a Swagger 2.0 document (expected swagger: \"2.0\")");
  CHECK(error_of("- a\n") == "not a Swagger 2.0 document (expected a map at the top)");
  CHECK(error_of("swagger: [").starts_with("not valid YAML: "));
  CHECK(error_of("swagger: \"2.0\"\npaths: {}\n") ==
        "`host` (the service name, an accepted JWT audience) is missing");
  CHECK(error_of("swagger: \"2.0\"\nhost: h\n") == "`paths` is missing or not a map");
  CHECK(error_of(doc("  /echo: {}\n")) == "`paths` defines no operation");
  CHECK(error_of(doc("  /echo:\n    get: {operationId: echoGet}\n")) ==
        "operation echoGet (GET /echo): Sluice has no handler for it; it serves POST /echo and GET "
        "/auth/info/<name>");
  CHECK(error_of(doc("  /shelves:\n    get: {operationId: listShelves}\n")) ==
        "operation listShelves (GET /shelves): Sluice has no handler for it; it serves POST /echo and GET "
        "/auth/info/<name>");
  CHECK(error_of(doc("  /auth/info/a/b:\n    get: {}\n")) ==
        "operation (no operationId) (GET /auth/info/a/b): Sluice has no handler for it; it serves POST /echo "
        "and GET /auth/info/<name>");
  CHECK(error_of(doc("  /auth/info/{svc}:\n    get: {}\n")) ==
        "path '/auth/info/{svc}': path templates are not supported");
  CHECK(error_of(doc("  echo:\n    post: {}\n")) == "path 'echo' does not start with /");
  CHECK(error_of(doc("  /echo:\n    fetch: {}\n")) == "path /echo: `fetch` is not an HTTP method");
  CHECK(error_of(doc("  /echo:\n    post: {security: [nope: []]}\n")) ==
        "POST /echo: security scheme 'nope' is not in securityDefinitions");
  CHECK(error_of(doc(auth_route("        - {api_key: [], jwt_a: []}\n        - jwt_b: []\n"))) ==
        "GET /auth/info/x: the security alternatives mix api_key with JWT schemes in a way ESP cannot check "
        "(an "
        "API key cannot be one side of an OR); put api_key in every alternative, or alone next to the JWT "
        "alternatives");
  CHECK(error_of(doc(auth_route("        - api_key: []\n        - {api_key: [], jwt_a: []}\n")))
            .starts_with("GET /auth/info/x: the security alternatives mix api_key with JWT schemes"));
  CHECK(error_of(doc(auth_route("        - {jwt_a: [], jwt_b: []}\n"))) ==
        "GET /auth/info/x: one requirement needs two JWTs (jwt_a and jwt_b); Sluice checks one token per "
        "request");
  CHECK(error_of(doc(auth_route("        - {}\n        - jwt_a: []\n"))) ==
        "GET /auth/info/x: an empty security requirement (optional authentication) is not supported");
  CHECK(error_of("swagger: \"2.0\"\nhost: h\npaths:\n" + echo +
                 "securityDefinitions:\n  api_key: {type: apiKey, name: key, in: query}\n"
                 "  j: {type: oauth2, x-google-jwks_uri: \"https://k\"}\n") ==
        "securityDefinitions.j: x-google-issuer is missing");
  CHECK(error_of("swagger: \"2.0\"\nhost: h\npaths:\n" + echo +
                 "securityDefinitions:\n  api_key: {type: apiKey, name: key, in: query}\n"
                 "  j: {type: oauth2, x-google-issuer: i}\n") ==
        "securityDefinitions.j: x-google-jwks_uri is missing (Sluice does not do OpenID discovery)");
  CHECK(
      error_of("swagger: \"2.0\"\nhost: h\npaths:\n" + echo +
               "securityDefinitions:\n  api_key: {type: apiKey, name: token, in: header}\n") ==
      "securityDefinitions.api_key: API keys are read from the query parameter key or api_key or the header "
      "x-api-key; in: 'header', name: 'token' is not supported");
  CHECK(error_of("swagger: \"2.0\"\nhost: h\npaths:\n" + echo +
                 "securityDefinitions:\n  api_key: {type: basic}\n") ==
        "securityDefinitions.api_key: type 'basic' is not supported (apiKey or oauth2 with x-google-issuer)");
  CHECK(error_of(doc("  /echo:\n    post: {}\n  \"/echo\":\n    post: {}\n")) ==
        "POST /echo: the operation is defined twice");
}

TEST_CASE("openapi: a file error names the file") {
  try {
    load_openapi_file("/nonexistent/openapi.yaml");
    FAIL("no exception");
  } catch (const openapi_error& e) {
    CHECK(std::string(e.what()) ==
          "/nonexistent/openapi.yaml: cannot read the file: No such file or directory");
  }
}
