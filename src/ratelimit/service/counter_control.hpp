#pragma once
// Operator control of a request's counters (docs/guides/operate.md): what each descriptor's limits hold
// now, or leaving them at a given count — resolved as a decision would resolve them (rules, overrides,
// `replaces`, limit tables, time zones), with nothing counted and no stat changed.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/config/rule_set.hpp"
#include "rls.pb.h"

namespace sluice::ratelimit::service {

struct service_error;

// One limit that applies to a descriptor, and what its counter holds.
struct limit_state {
  std::string rule;  // the stats key its stats count under ("(override)" for a limit sent in the request)
  std::string name;  // the rule's `name`, if any
  config::algorithm algorithm = config::algorithm::fixed_window;
  std::uint32_t requests_per_unit = 0;
  config::unit unit = config::unit::unknown;
  std::uint32_t unit_multiplier = 1;
  std::string time_zone;  // a calendar window's zone, or ""
  bool shadow_mode = false;
  std::string key;  // the backend key
  std::uint64_t used = 0;
  std::uint64_t capacity = 0;  // the limit (GCRA: the burst)
  std::uint64_t remaining = 0;
  std::int64_t reset_seconds = 0;
  // Hits this worker counted and has not sent to the store yet (batched counting), included in `used`.
  std::int64_t unsent = 0;
  // A concurrency limit per holder: its holder_key, how many holders hold, and when the request named a
  // holder (its last entry), that holder and the slots it holds (0: none).
  std::string holder_key;
  std::uint64_t holders = 0;
  std::optional<std::string> holder;
  std::uint64_t holder_slots = 0;
};

// /explain: how the worker's rules matched a descriptor (config/rule_explain.hpp's walk), as text.
struct rule_walk {
  struct level {
    std::string entry;  // "key=value"
    std::string rule;   // the node's stats key
    std::string matched_by;
  };
  struct candidate {
    std::string rule;
    std::size_t level = 0;  // 1-based
    std::string why;
  };
  bool override = false;            // the request sent its own limit: no rule is looked up
  bool walked = false;              // the domain's rules were walked (it is configured; no override)
  std::string outcome;              // what the walk found, in a sentence
  std::optional<std::string> rule;  // the stats key of the node whose limits apply
  std::vector<level> path;
  std::vector<candidate> candidates;  // nearest first
  std::string limits_from;            // the applying rule's limit table, if any
};

struct descriptor_state {
  bool matched = false;                           // a rule (or a limit sent in the request) applies
  bool unlimited = false;                         // the rule is `unlimited: true`
  bool replaced = false;                          // another matched rule's `replaces` names it
  const config::descriptor_node* node = nullptr;  // the matched rule (valid while the done callback runs)
  std::vector<limit_state> limits;
  rule_walk walk;  // explain only
};

enum class control_action : std::uint8_t {
  inspect,    // read the counters
  explain,    // read them, and say how the rules matched each descriptor
  overwrite,  // leave each limit's counter at `used` hits (0: deleted: every algorithm, leases too)
};

// Called once, possibly on another thread than the caller's (a Redis Cluster's node); null means success.
// The states are the descriptors' in order (inspect only).
using control_done = std::function<void(const service_error*, std::vector<descriptor_state>&&)>;

}  // namespace sluice::ratelimit::service
