#pragma once
// Reading one field of a rule file's mapping, with upstream's error messages. Used by the loader and by the
// options Sluice adds to upstream's rules.

#include <cstdint>
#include <string>
#include <string_view>

namespace YAML {
class Node;
}

namespace sluice::ratelimit::config {

// Thrown inside the loader only; load_rules turns it into load_result::error.
struct config_error {
  std::string message;
};

// Absent or null fields read as "", false and 0.
std::string scalar_string(const YAML::Node& node, std::string_view field);
bool scalar_bool(const YAML::Node& node, std::string_view field);
std::uint32_t scalar_uint32(const YAML::Node& node, std::string_view field);
void expect_list(const YAML::Node& node, std::string_view field);

}  // namespace sluice::ratelimit::config
