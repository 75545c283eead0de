#pragma once
// The bounds on a rule file's tree as the loader walks it: YAML aliases make a small document a large tree (a
// 2 KB file can expand to billions of nodes) and a deep one (an alias inside its own anchor nests without
// end), and every pass over the rules walks the expanded tree, recursing per level. A walk counts each node
// it enters and refuses the file, with yaml.v2's messages where upstream has one, before either gets out of
// hand. Both throw config_error.

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <vector>

namespace sluice::ratelimit::config {

struct expansion {
  std::size_t nodes = 0;
  std::size_t copies = 0;  // nodes reached through an alias
  // Where the furthest node walked so far starts in the text. The walk follows the text, and an alias repeats
  // an anchor defined before it, so a node that starts no further than this is a copy.
  int furthest = -1;
  std::vector<const YAML::Node*> path;  // from the root to the node being checked
};

// One node deeper in a walk: counted, on the path and within the depth bound until the end of the scope.
class walk_level {
 public:
  walk_level(const YAML::Node& node, expansion& walk);
  ~walk_level() { walk_.path.pop_back(); }
  walk_level(const walk_level&) = delete;
  walk_level& operator=(const walk_level&) = delete;

 private:
  expansion& walk_;
};

// Metadata holds any keys and values, but counts toward the bounds on aliasing and depth.
void bound_metadata(const YAML::Node& node, expansion& walk);

// yaml.v2's message for a key given twice in one mapping.
[[noreturn]] void already_defined(const YAML::Node& key);

}  // namespace sluice::ratelimit::config
