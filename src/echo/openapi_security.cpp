#include "echo/openapi_security.hpp"

#include <cctype>
#include <vector>

#include "core/strings.hpp"

namespace sluice::echo {

namespace {

std::string scalar(const YAML::Node& map, const char* field, const std::string& where) {
  YAML::Node node = map[field];
  if (!node) return {};
  if (!node.IsScalar()) throw openapi_error(core::cat(where, "`", field, "` must be a string"));
  return node.Scalar();
}

std::vector<std::string> split_audiences(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view one = text.substr(0, comma);
    while (!one.empty() && std::isspace(static_cast<unsigned char>(one.front()))) one.remove_prefix(1);
    while (!one.empty() && std::isspace(static_cast<unsigned char>(one.back()))) one.remove_suffix(1);
    if (!one.empty()) out.emplace_back(one);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

security_scheme read_api_key(const YAML::Node& def, const std::string& where) {
  // Sluice reads keys where ESP does by default; a definition naming another place would be silently ignored.
  std::string in = scalar(def, "in", where);
  std::string name = scalar(def, "name", where);
  bool known =
      (in == "query" && (name == "key" || name == "api_key")) || (in == "header" && name == "x-api-key");
  if (!known)
    throw openapi_error(core::cat(where,
                                  "API keys are read from the query parameter key or api_key or the header ",
                                  "x-api-key; in: '", in, "', name: '", name, "' is not supported"));
  return {true, {}};
}

security_scheme read_jwt(const std::string& name, const YAML::Node& def, const std::string& where) {
  security_scheme s;
  s.provider.name = name;
  s.provider.issuer = scalar(def, "x-google-issuer", where);
  if (s.provider.issuer.empty()) throw openapi_error(core::cat(where, "x-google-issuer is missing"));
  s.provider.jwks_uri = scalar(def, "x-google-jwks_uri", where);
  if (s.provider.jwks_uri.empty())
    throw openapi_error(
        core::cat(where, "x-google-jwks_uri is missing (Sluice does not do OpenID discovery)"));
  if (def["x-google-jwt-locations"])
    throw openapi_error(core::cat(where, "x-google-jwt-locations is not supported (tokens are read from ",
                                  "Authorization: Bearer and the access_token query parameter)"));
  s.provider.audiences = split_audiences(scalar(def, "x-google-audiences", where));
  return s;
}

}  // namespace

security_context read_security_definitions(const YAML::Node& definitions) {
  security_context context;
  if (!definitions) return context;
  if (!definitions.IsMap()) throw openapi_error("`securityDefinitions` must be a map");
  for (const auto& kv : definitions) {
    std::string name = kv.first.as<std::string>("");
    std::string where = core::cat("securityDefinitions.", name, ": ");
    if (!kv.second.IsMap()) throw openapi_error(core::cat(where, "must be a map"));
    std::string type = scalar(kv.second, "type", where);
    if (type == "apiKey") {
      context.schemes[name] = read_api_key(kv.second, where);
    } else if (type == "oauth2") {
      context.schemes[name] = read_jwt(name, kv.second, where);
    } else {
      throw openapi_error(
          core::cat(where, "type '", type, "' is not supported (apiKey or oauth2 with x-google-issuer)"));
    }
  }
  return context;
}

void apply_security(const YAML::Node& requirement, const security_context& context, std::string_view where,
                    operation& op) {
  if (!requirement || requirement.IsNull()) return;
  if (!requirement.IsSequence())
    throw openapi_error(core::cat(where, "`security` must be a list of requirements"));
  // Each alternative: does it name an API key, and which JWT provider (at most one).
  struct alternative {
    bool api_key = false;
    const auth::jwt_provider* jwt = nullptr;
  };
  std::vector<alternative> alternatives;
  for (const auto& item : requirement) {
    if (!item.IsMap()) throw openapi_error(core::cat(where, "each `security` requirement must be a map"));
    alternative alt;
    for (const auto& kv : item) {
      std::string name = kv.first.as<std::string>("");
      auto it = context.schemes.find(name);
      if (it == context.schemes.end())
        throw openapi_error(core::cat(where, "security scheme '", name, "' is not in securityDefinitions"));
      if (it->second.api_key) {
        alt.api_key = true;
      } else if (alt.jwt) {
        throw openapi_error(core::cat(where, "one requirement needs two JWTs (", alt.jwt->name, " and ", name,
                                      "); Sluice checks one token per request"));
      } else {
        alt.jwt = &it->second.provider;
      }
    }
    if (!alt.api_key && !alt.jwt)
      throw openapi_error(
          core::cat(where, "an empty security requirement (optional authentication) is not supported"));
    alternatives.push_back(alt);
  }
  std::size_t with_key = 0, with_jwt = 0, key_only = 0;
  for (const auto& alt : alternatives) {
    with_key += alt.api_key ? 1 : 0;
    with_jwt += alt.jwt ? 1 : 0;
    key_only += alt.api_key && !alt.jwt ? 1 : 0;
  }
  const std::size_t n = alternatives.size();
  // Servable: no key at all; a key in every alternative, with a JWT in all or none of them; or the sample's
  // list (`- api_key: []` next to `- google_jwt: []`), which ESP reads as key AND token.
  bool servable = with_key == 0 || (with_key == n && (with_jwt == 0 || with_jwt == n)) ||
                  (key_only == 1 && with_key == 1 && with_jwt == n - 1);
  if (!servable)
    throw openapi_error(
        core::cat(where, "the security alternatives mix api_key with JWT schemes in a way ESP ",
                  "cannot check (an API key cannot be one side of an OR); put api_key in every ",
                  "alternative, or alone next to the JWT alternatives"));
  op.api_key = with_key > 0;
  for (const auto& alt : alternatives)
    if (alt.jwt) op.jwt_providers.push_back(*alt.jwt);
}

}  // namespace sluice::echo
