#include "ratelimit/config/yaml_bounds.hpp"

#include <set>
#include <string>

#include "core/strings.hpp"
#include "ratelimit/config/yaml_fields.hpp"

namespace sluice::ratelimit::config {

namespace {

// A document is refused, with the error Go's yaml.v2 gives upstream, once its nodes are almost all copies
// made by aliases, by yaml.v2's rule (decode.go, allowedAliasRatio): past 1,000 nodes and 100 copies, at most
// 99% copies up to 400,000 nodes, falling to 10% at 4,000,000. So a bomb is refused after a few thousand
// nodes, and a large document without aliases is not. Past max_expanded_nodes any document is refused.
constexpr std::size_t max_expanded_nodes = 1'000'000;
// Aliases also make a deep tree: one inside the value of its own anchor nests without end (yaml-cpp builds
// that, where yaml.v2 refuses it), and a chain of them nests far deeper than the text. The passes over the
// rules recurse per level, so past this depth the file is refused before one of them runs out of stack.
constexpr std::size_t max_depth = 256;

bool excessive_aliasing(const expansion& walk) {
  if (walk.nodes > max_expanded_nodes) return true;
  if (walk.copies <= 100 || walk.nodes <= 1000) return false;
  constexpr double low = 400'000, high = 4'000'000;
  const auto nodes = static_cast<double>(walk.nodes);
  const double allowed = nodes <= low    ? 0.99
                         : nodes >= high ? 0.10
                                         : 0.99 - 0.89 * (nodes - low) / (high - low);
  return static_cast<double>(walk.copies) / nodes > allowed;
}

// Counts one node walked, a copy or not; throws once the aliasing is excessive.
void count(const YAML::Node& node, expansion& walk) {
  ++walk.nodes;
  if (node.Mark().pos <= walk.furthest) {
    ++walk.copies;
  } else {
    walk.furthest = node.Mark().pos;
  }
  if (excessive_aliasing(walk))
    throw config_error{"error loading config file: yaml: document contains excessive aliasing"};
}

[[noreturn]] void too_deep(const std::vector<const YAML::Node*>& path) {
  for (std::size_t i = 0; i < path.size(); ++i) {
    for (std::size_t j = i + 1; j < path.size(); ++j) {
      if (path[i]->is(*path[j])) {
        throw config_error{
            core::cat("error loading config file: yaml: line ", path[i]->Mark().line + 1,
                      ": anchor value contains itself (an alias inside it refers back to it)")};
      }
    }
  }
  throw config_error{
      core::cat("error loading config file: the rules nest deeper than ", max_depth, " levels")};
}

}  // namespace

[[noreturn]] void already_defined(const YAML::Node& key) {
  throw config_error{core::cat("error loading config file: mapping key '", key.Scalar(),
                               "' already defined at line ", key.Mark().line + 1)};
}

walk_level::walk_level(const YAML::Node& node, expansion& walk) : walk_(walk) {
  count(node, walk);
  walk.path.push_back(&node);
  if (walk.path.size() > max_depth) too_deep(walk.path);
}

void bound_metadata(const YAML::Node& node, expansion& walk) {
  const walk_level level(node, walk);
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& kv : node) {
      if (kv.first.IsScalar() && !seen.insert(kv.first.Scalar()).second) already_defined(kv.first);
      bound_metadata(kv.second, walk);
    }
  } else if (node.IsSequence()) {
    for (const auto& element : node) bound_metadata(element, walk);
  }
}

}  // namespace sluice::ratelimit::config
