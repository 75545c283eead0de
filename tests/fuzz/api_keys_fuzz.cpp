// libFuzzer: arbitrary bytes as an API key file (API_KEYS_FILE). Checks: no crash, no leak, no exception (the
// parser reports errors as values); a refused file yields no keys and an error; an accepted one is a map with
// one field, `keys`, whose entries give each field at most once, has only non-empty, distinct keys, and
// written back as YAML (by the harness) parses to the same entries.
//
// Build and run: scripts/fuzz api_keys [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "../support/yaml_quoted.hpp"
#include "auth/api_key_file.hpp"

namespace {

using sluice::test::yaml_quoted;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto file = sluice::auth::parse_api_key_file(text);
  if (!file.error.empty()) {
    check(file.keys.empty());
    return 0;
  }
  // Nothing given twice: yaml-cpp keeps repeated map keys, and the parser must refuse them.
  const YAML::Node root = YAML::Load(std::string(text));
  check(root.IsMap() && root.size() == 1);
  const auto only = *root.begin();
  check(only.first.as<std::string>("") == "keys");
  for (const auto& entry : only.second) {
    std::set<std::string> fields;
    for (const auto& kv : entry) check(fields.insert(kv.first.as<std::string>("")).second);
  }
  std::set<std::string_view> distinct;
  std::string written = "keys:\n";
  for (const auto& entry : file.keys) {
    check(!entry.key.empty() && distinct.insert(entry.key).second);
    written += "  - {key: " + yaml_quoted(entry.key) + ", name: " + yaml_quoted(entry.name) +
               ", enabled: " + (entry.enabled ? "true" : "false") + "}\n";
  }
  const auto again = sluice::auth::parse_api_key_file(written);
  check(again.error.empty() && again.keys.size() == file.keys.size());
  for (std::size_t i = 0; i < file.keys.size(); ++i) {
    check(again.keys[i].key == file.keys[i].key && again.keys[i].name == file.keys[i].name &&
          again.keys[i].enabled == file.keys[i].enabled);
  }
  return 0;
}
