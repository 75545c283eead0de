#include "ratelimit/config/yaml_fields.hpp"

#include <yaml-cpp/yaml.h>

#include "core/strings.hpp"
#include "ratelimit/config/yaml_scalar.hpp"

namespace sluice::ratelimit::config {

std::string scalar_string(const YAML::Node& node, std::string_view field) {
  if (!node || node.IsNull()) return {};
  if (!node.IsScalar())
    throw config_error{core::cat("error loading config file: ", field, ": expected a string")};
  return node.Scalar();
}

bool scalar_bool(const YAML::Node& node, std::string_view field) {
  if (!node || node.IsNull()) return false;
  if (node.IsScalar()) {
    if (auto b = parse_yaml_bool(node); b) return *b;
  }
  throw config_error{core::cat("error loading config file: ", field, ": cannot unmarshal '",
                               node.IsScalar() ? node.Scalar() : "", "' into bool")};
}

std::uint32_t scalar_uint32(const YAML::Node& node, std::string_view field) {
  if (!node || node.IsNull()) return 0;
  std::uint32_t out = 0;
  if (node.IsScalar() && parse_yaml_uint32(node, out)) return out;
  throw config_error{core::cat("error loading config file: ", field, ": cannot unmarshal '",
                               node.IsScalar() ? node.Scalar() : "", "' into uint32")};
}

void expect_list(const YAML::Node& node, std::string_view field) {
  if (node && !node.IsNull() && !node.IsSequence()) {
    throw config_error{core::cat("error loading config file: ", field, ": expected a list")};
  }
}

}  // namespace sluice::ratelimit::config
