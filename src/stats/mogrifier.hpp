#pragma once
// DogStatsD mogrifiers (upstream's godogstats): turn a dotted stat name into a shorter name plus tags, e.g.
// "ratelimit.service.rate_limit.<domain>.<key>.total_hits" into "ratelimit.service.rate_limit.total_hits"
// with domain:<domain> and descriptor:<key>. Patterns are Perl-style (Boost.Regex, close to Go's RE2) and
// searched in the name; the first mogrifier whose pattern matches wins.

#include <boost/regex.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stats/sink_settings.hpp"

namespace sluice::stats {

struct mogrified {
  std::string name;
  std::vector<std::string> tags;  // "key:value"
};

class mogrifier_list {
 public:
  // Throws core::settings_error with upstream's start-up errors: no PATTERN, a pattern that does not compile,
  // no NAME, a tag without key or value.
  explicit mogrifier_list(const std::vector<mogrifier_settings>& settings);

  // nullopt when no pattern matches: the name stays as it is, without tags.
  std::optional<mogrified> apply(const std::string& name) const;

 private:
  struct entry {
    boost::regex pattern;
    std::string name;
    std::vector<std::pair<std::string, std::string>> tags;
  };
  std::vector<entry> entries_;
};

// `text` with each "$<digits>" replaced by that group of the match (empty when the group does not exist;
// upstream would crash).
std::string expand_groups(std::string_view text, const boost::smatch& groups);

}  // namespace sluice::stats
