#include "auth/api_key_file.hpp"

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>

#include "core/strings.hpp"

namespace sluice::auth {

namespace {

struct file_error {
  std::string message;
};

std::string at(const YAML::Node& node) {
  return core::cat(" (line ", node.Mark().line + 1, ")");
}

std::string scalar(const YAML::Node& node, std::string_view field) {
  // yaml-cpp types `~`, `null` and an empty value as Null, not Scalar.
  if (!node.IsScalar()) throw file_error{core::cat("`", field, "` must be a string", at(node))};
  return node.Scalar();
}

bool boolean(const YAML::Node& node) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
    throw file_error{core::cat("`enabled` must be true or false, got '", node.IsScalar() ? node.Scalar() : "",
                               "'", at(node))};
  return value;
}

api_key_entry parse_entry(const YAML::Node& node, std::size_t index) {
  if (!node.IsMap()) throw file_error{core::cat("keys[", index, "] must be a map with `key`", at(node))};
  api_key_entry entry;
  bool has_key = false;
  std::set<std::string> given;  // yaml-cpp keeps a repeated field, which would silently win
  for (const auto& kv : node) {
    std::string field = kv.first.as<std::string>("");
    if (!given.insert(field).second)
      throw file_error{core::cat("keys[", index, "]: `", field, "` is given twice", at(kv.first))};
    if (field == "key") {
      entry.key = scalar(kv.second, "key");
      has_key = true;
    } else if (field == "name") {
      entry.name = scalar(kv.second, "name");
    } else if (field == "enabled") {
      entry.enabled = boolean(kv.second);
    } else {
      throw file_error{core::cat("keys[", index, "]: unknown field `", field,
                                 "` (expected key, name, enabled)", at(kv.first))};
    }
  }
  if (!has_key || entry.key.empty())
    throw file_error{core::cat("keys[", index, "] has no `key` (or an empty one)", at(node))};
  return entry;
}

}  // namespace

api_key_file parse_api_key_file(std::string_view yaml_text) {
  api_key_file out;
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (!root.IsMap()) throw file_error{"expected a map with a `keys` list at the top"};
    // Not a default YAML::Node for "none yet": that counts as defined, and assigning to a bound one rebinds
    // the node it came from.
    std::optional<YAML::Node> list;
    for (const auto& kv : root) {
      std::string field = kv.first.as<std::string>("");
      if (field != "keys")
        throw file_error{core::cat("unknown field `", field, "` (expected keys)", at(kv.first))};
      if (list) throw file_error{core::cat("`keys` is given twice", at(kv.first))};
      list = kv.second;
    }
    if (!list) throw file_error{"no `keys` list"};
    if (!list->IsSequence() && !list->IsNull())
      throw file_error{core::cat("`keys` must be a list", at(*list))};
    std::set<std::string_view> seen;
    std::size_t index = 0;
    for (const auto& item : *list) out.keys.push_back(parse_entry(item, index++));
    // Duplicates would make a lookup ambiguous (one copy enabled, one disabled).
    for (std::size_t i = 0; i < out.keys.size(); ++i)
      if (!seen.insert(out.keys[i].key).second)
        throw file_error{core::cat("keys[", i, "] repeats the key of an earlier entry")};
  } catch (const file_error& e) {
    out = {{}, e.message};
  } catch (const YAML::Exception& e) {
    out = {{}, core::cat("not valid YAML: ", e.what())};
  }
  return out;
}

}  // namespace sluice::auth
