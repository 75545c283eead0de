#pragma once
// The API key file format: YAML `keys: [{key: "...", name: "...", enabled: true}]`. Parsing only; the store
// owns reading, hashing and reloading.

#include <string>
#include <string_view>
#include <vector>

namespace sluice::auth {

struct api_key_entry {
  std::string key;
  std::string name;  // who the key belongs to (for logs); may be empty
  bool enabled = true;
};

struct api_key_file {
  std::vector<api_key_entry> keys;
  std::string error;  // empty on success; otherwise what is wrong, with the line
};

// Rejects unknown and repeated fields, empty and duplicate keys, and non-boolean `enabled`, so a typo never
// silently enables or disables a key.
api_key_file parse_api_key_file(std::string_view yaml_text);

}  // namespace sluice::auth
