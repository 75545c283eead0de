#include "echo/openapi.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/read_file.hpp"
#include "core/strings.hpp"
#include "echo/openapi_security.hpp"

namespace sluice::echo {

namespace {

constexpr std::string_view methods[] = {"get", "put", "post", "delete", "options", "head", "patch"};

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string text_field(const YAML::Node& map, const char* field, std::string_view where) {
  YAML::Node node = map[field];
  if (!node) return {};
  if (!node.IsScalar()) throw openapi_error(core::cat(where, "`", field, "` must be a string"));
  return node.Scalar();
}

// Sluice has handlers for the sample's operations only, recognised by method and path shape.
operation_kind kind_of(const std::string& method, const std::string& path, const std::string& id) {
  constexpr std::string_view auth_prefix = "/auth/info/";
  if (method == "POST" && path == "/echo") return operation_kind::echo;
  if (method == "GET" && path.starts_with(auth_prefix) && path.size() > auth_prefix.size() &&
      path.find('/', auth_prefix.size()) == std::string::npos)
    return operation_kind::auth_info;
  throw openapi_error(
      core::cat("operation ", id.empty() ? "(no operationId)" : id, " (", method, " ", path,
                "): Sluice has no handler for it; it serves POST /echo and GET /auth/info/<name>"));
}

std::string join_path(const std::string& base, const std::string& path) {
  if (base.empty() || base == "/") return path;
  return (base.back() == '/' ? base.substr(0, base.size() - 1) : base) + path;
}

void read_operations(const YAML::Node& paths, const std::string& base_path, const security_context& security,
                     openapi_document& doc) {
  if (!paths || !paths.IsMap()) throw openapi_error("`paths` is missing or not a map");
  std::set<std::string> seen;
  for (const auto& p : paths) {
    std::string path = p.first.as<std::string>("");
    if (!path.starts_with('/')) throw openapi_error(core::cat("path '", path, "' does not start with /"));
    if (path.find('{') != std::string::npos)
      throw openapi_error(core::cat("path '", path, "': path templates are not supported"));
    if (!p.second.IsMap()) throw openapi_error(core::cat("path ", path, " must be a map of operations"));
    for (const auto& m : p.second) {
      std::string key = m.first.as<std::string>("");
      if (key == "parameters" || key.starts_with("x-")) continue;
      if (std::find(std::begin(methods), std::end(methods), key) == std::end(methods))
        throw openapi_error(core::cat("path ", path, ": `", key, "` is not an HTTP method"));
      operation op;
      op.method = upper(key);
      op.path = join_path(base_path, path);
      std::string where = core::cat(op.method, " ", path, ": ");
      if (!m.second.IsMap()) throw openapi_error(core::cat(where, "the operation must be a map"));
      op.operation_id = text_field(m.second, "operationId", where);
      op.kind = kind_of(op.method, path, op.operation_id);
      if (!seen.insert(op.method + " " + op.path).second)
        throw openapi_error(core::cat(where, "the operation is defined twice"));
      YAML::Node requirement = m.second["security"] ? m.second["security"] : security.top_level;
      apply_security(requirement, security, where, op);
      doc.operations.push_back(std::move(op));
    }
  }
  if (doc.operations.empty()) throw openapi_error("`paths` defines no operation");
}

}  // namespace

openapi_document parse_openapi(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw openapi_error(core::cat("not valid YAML: ", e.what()));
  }
  if (!root.IsMap()) throw openapi_error("not a Swagger 2.0 document (expected a map at the top)");
  if (root["openapi"])
    throw openapi_error(
        "OpenAPI 3 documents are not supported; Cloud Endpoints reads Swagger 2.0 (swagger: \"2.0\")");
  if (!root["swagger"] || !root["swagger"].IsScalar() || root["swagger"].Scalar() != "2.0")
    throw openapi_error("not a Swagger 2.0 document (expected swagger: \"2.0\")");
  openapi_document doc;
  doc.service_name = text_field(root, "host", "");
  if (doc.service_name.empty())
    throw openapi_error("`host` (the service name, an accepted JWT audience) is missing");
  std::string base_path = text_field(root, "basePath", "");
  if (!base_path.empty() && !base_path.starts_with('/'))
    throw openapi_error(core::cat("basePath '", base_path, "' does not start with /"));
  security_context security = read_security_definitions(root["securityDefinitions"]);
  security.top_level = root["security"];
  try {
    read_operations(root["paths"], base_path, security, doc);
  } catch (const YAML::Exception& e) {
    throw openapi_error(core::cat("unexpected structure: ", e.what()));
  }
  return doc;
}

openapi_document load_openapi_file(const std::string& file) {
  auto text = core::read_file(file);
  if (!text) throw openapi_error(core::cat(file, ": cannot read the file: ", text.error()));
  try {
    return parse_openapi(*text);
  } catch (const openapi_error& e) {
    throw openapi_error(core::cat(file, ": ", e.what()));
  }
}

}  // namespace sluice::echo
