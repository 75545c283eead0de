#include "ratelimit/config/yaml_metadata.hpp"

#include <yaml-cpp/yaml.h>

#include "core/strings.hpp"
#include "ratelimit/config/yaml_scalar.hpp"

namespace sluice::ratelimit::config {

namespace {

void to_struct(const YAML::Node& map, const std::string& path, google::protobuf::Struct& out);

void to_value(const YAML::Node& node, const std::string& path, google::protobuf::Value& out) {
  if (node.IsMap()) return to_struct(node, path, *out.mutable_struct_value());
  if (node.IsSequence()) {
    auto* list = out.mutable_list_value();
    std::size_t i = 0;
    for (const auto& element : node) to_value(element, core::cat(path, "[", i++, "]"), *list->add_values());
    return;
  }
  if (!node.IsScalar()) return out.set_null_value(google::protobuf::NULL_VALUE);
  switch (classify_scalar(node)) {
    case scalar_kind::null:
      return out.set_null_value(google::protobuf::NULL_VALUE);
    case scalar_kind::boolean:
      return out.set_bool_value(*parse_yaml_bool(node));
    case scalar_kind::integer:
    case scalar_kind::floating: {
      auto number = parse_yaml_number(node);
      if (!number) {
        throw std::invalid_argument(
            core::cat(path, ": '", node.Scalar(), "' is not a finite number (quote it to make it a string)"));
      }
      return out.set_number_value(*number);
    }
    case scalar_kind::string:
    case scalar_kind::timestamp:
      return out.set_string_value(node.Scalar());
  }
}

void to_struct(const YAML::Node& map, const std::string& path, google::protobuf::Struct& out) {
  auto& fields = *out.mutable_fields();
  for (const auto& kv : map) {
    if (!kv.first.IsScalar() || classify_scalar(kv.first) != scalar_kind::string) {
      throw std::invalid_argument(core::cat(path, ": key '", kv.first.IsScalar() ? kv.first.Scalar() : "",
                                            "' is not a string (quote it to make it one)"));
    }
    const std::string& key = kv.first.Scalar();
    to_value(kv.second, core::cat(path, ".", key), fields[key]);
  }
}

}  // namespace

std::shared_ptr<const google::protobuf::Struct> metadata_from_yaml(const YAML::Node& node) {
  if (!node.IsMap()) throw std::invalid_argument("metadata: expected a mapping");
  auto out = std::make_shared<google::protobuf::Struct>();
  to_struct(node, "metadata", *out);
  return out;
}

}  // namespace sluice::ratelimit::config
