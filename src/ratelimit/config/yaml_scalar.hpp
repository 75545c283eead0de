#pragma once
// YAML 1.1 plain-scalar resolution as upstream's yaml.v2 does it (yaml-cpp leaves scalars untyped): decides
// whether `0.25`, `yes` or `2001-12-14` is a string, and parses bools and integers the same way.

#include <cstdint>
#include <optional>

namespace YAML {
class Node;
}

namespace sluice::ratelimit::config {

enum class scalar_kind { string, null, boolean, integer, floating, timestamp };

scalar_kind classify_scalar(const YAML::Node& scalar);
std::optional<bool> parse_yaml_bool(const YAML::Node& scalar);
// An integer or a finite float, as a double; nullopt for anything else (.inf and .nan included).
std::optional<double> parse_yaml_number(const YAML::Node& scalar);
// False when the scalar is not an integer in 0..4294967295.
bool parse_yaml_uint32(const YAML::Node& scalar, std::uint32_t& out);

}  // namespace sluice::ratelimit::config
