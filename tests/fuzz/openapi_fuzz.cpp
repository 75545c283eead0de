// libFuzzer: arbitrary bytes as the echo API's OpenAPI (Swagger 2.0) document. Checks: no crash, no leak, and
// no exception but openapi_error (whose message is never empty); an accepted document has operations Sluice
// can serve (POST /echo or GET /auth/info/<name> under one basePath, each once), and written back as Swagger
// (by the harness: its securityDefinitions rebuilt from the operations) it parses to the same operations.
//
// Build and run: scripts/fuzz openapi [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "../support/yaml_quoted.hpp"
#include "echo/openapi.hpp"

namespace {

using namespace sluice::echo;
using sluice::test::yaml_quoted;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view auth_prefix = "/auth/info/";

// The document's path of an operation (what follows basePath in op.path).
std::string_view document_path(const operation& op) {
  const std::string_view path = op.path;
  if (op.kind == operation_kind::echo) return path.substr(path.size() - 5);
  return path.substr(path.rfind(auth_prefix));
}

// What basePath put in front of the document's path (without the one trailing '/' join_path drops).
std::string_view base_path(const operation& op) {
  return std::string_view(op.path).substr(0, op.path.size() - document_path(op).size());
}

bool same_providers(const operation& a, const operation& b) {
  if (a.jwt_providers.size() != b.jwt_providers.size()) return false;
  for (std::size_t i = 0; i < a.jwt_providers.size(); ++i) {
    const auto& p = a.jwt_providers[i];
    const auto& q = b.jwt_providers[i];
    if (p.name != q.name || p.issuer != q.issuer || p.jwks_uri != q.jwks_uri || p.audiences != q.audiences)
      return false;
  }
  return true;
}

void check_operations(const openapi_document& doc) {
  check(!doc.service_name.empty() && !doc.operations.empty());
  std::set<std::string> seen;
  for (const auto& op : doc.operations) {
    check(seen.insert(op.method + " " + op.path).second);
    if (op.kind == operation_kind::echo) {
      check(op.method == "POST" && op.path.ends_with("/echo"));
    } else {
      check(op.method == "GET");
      const auto at = op.path.rfind(auth_prefix);
      check(at != std::string::npos && op.path.size() > at + auth_prefix.size() &&
            op.path.find('/', at + auth_prefix.size()) == std::string::npos);
    }
    check(base_path(op) == base_path(doc.operations[0]));
  }
}

// Swagger for the same operations. Security schemes are named after the operations' providers; the API key
// scheme gets a name no provider has.
std::string written(const openapi_document& doc) {
  const std::string base(base_path(doc.operations[0]));
  std::map<std::string, const sluice::auth::jwt_provider*> providers;
  for (const auto& op : doc.operations)
    for (const auto& p : op.jwt_providers) providers.emplace(p.name, &p);
  std::string key_scheme = "api_key";
  while (providers.contains(key_scheme)) key_scheme += "_";

  std::string out = "swagger: \"2.0\"\nhost: " + yaml_quoted(doc.service_name) + "\n";
  // join_path drops one trailing '/' of basePath: give it one to drop.
  if (!base.empty()) out += "basePath: " + yaml_quoted(base + "/") + "\n";
  out += "securityDefinitions:\n  " + yaml_quoted(key_scheme) + ": {type: apiKey, in: query, name: key}\n";
  for (const auto& [name, p] : providers) {
    std::string audiences;
    for (const auto& a : p->audiences) audiences += (audiences.empty() ? "" : ",") + a;
    out += "  " + yaml_quoted(name) + ": {type: oauth2, x-google-issuer: " + yaml_quoted(p->issuer) +
           ", x-google-jwks_uri: " + yaml_quoted(p->jwks_uri) +
           ", x-google-audiences: " + yaml_quoted(audiences) + "}\n";
  }
  out += "paths:\n";
  std::map<std::string, std::string> paths;  // document path -> its operations
  for (const auto& op : doc.operations) {
    std::string& ops = paths[std::string(document_path(op))];
    ops += "    " + std::string(op.kind == operation_kind::echo ? "post" : "get") + ":\n";
    if (!op.operation_id.empty()) ops += "      operationId: " + yaml_quoted(op.operation_id) + "\n";
    ops += "      security: [";
    // A key and tokens: the key alone next to one alternative per provider (ESP reads that as key AND token).
    if (op.api_key) ops += "{" + yaml_quoted(key_scheme) + ": []}, ";
    for (const auto& p : op.jwt_providers) ops += "{" + yaml_quoted(p.name) + ": []}, ";
    ops += "]\n";
  }
  for (const auto& [path, ops] : paths) out += "  " + yaml_quoted(path) + ":\n" + ops;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  openapi_document doc;
  try {
    doc = parse_openapi(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const openapi_error& e) {
    check(*e.what() != '\0');
    return 0;
  }
  check_operations(doc);
  const auto again = parse_openapi(written(doc));
  check(again.service_name == doc.service_name && again.operations.size() == doc.operations.size());
  for (const auto& op : doc.operations) {
    const operation* match = nullptr;
    for (const auto& other : again.operations)
      if (other.method == op.method && other.path == op.path) match = &other;
    check(match != nullptr && match->operation_id == op.operation_id && match->kind == op.kind &&
          match->api_key == op.api_key && same_providers(*match, op));
  }
  return 0;
}
