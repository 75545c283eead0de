#pragma once
// The statsd and DogStatsD line formats (sans-io): "name:value|type[|@rate][|#tags]\n".
//   statsd (gostats' net sink): EXTRA_TAGS inside the name (".__k=v"); timers as integers when whole, else
//   with six decimals, as gostats writes them. DogStatsD (upstream's godogstats on datadog-go): the name
//   through the mogrifiers, EXTRA_TAGS then the mogrifier's tags as "|#k:v,..."; timers in whole milliseconds
//   (upstream truncates them to a Duration).
// A sample rate below 1 ("|@0.25") is only written for timers whose observations were sampled.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "stats/mogrifier.hpp"
#include "stats/sink_settings.hpp"
#include "stats/tags.hpp"

namespace sluice::stats {

class statsd_format {
 public:
  statsd_format(bool dogstatsd, tag_list extra_tags, const std::vector<mogrifier_settings>& mogrifiers);

  // Each appends one line to `out`.
  void counter(std::string& out, const std::string& name, std::uint64_t delta);
  void gauge(std::string& out, const std::string& name, std::int64_t value);
  void timer(std::string& out, const std::string& name, double milliseconds, double sample_rate);

 private:
  struct head {
    std::string name;
    std::string tags;  // "|#k:v,..." or empty
  };
  // Rendered once per stat: the mogrifiers' regexes are too slow to run at every flush.
  const head& render(const std::string& name);
  void line(std::string& out, const head& h, std::string_view type, double sample_rate);

  bool dogstatsd_;
  tag_list extra_tags_;
  mogrifier_list mogrifiers_;
  std::unordered_map<std::string, head> heads_;
};

}  // namespace sluice::stats
