#pragma once
// The sink used when none is chosen (USE_STATSD=false and no other): gostats' logging sink, one JSON line per
// event on stderr, e.g.
//   {"level":"debug","ts":1700000000.123456,"logger":"gostats.loggingsink","msg":"flushing counter",
//    "json":{"name":"ratelimit.service.config_load_success","type":"counter","value":"1.000000"}}
// and a "flushing all stats" line at the end of every flush. Names carry EXTRA_TAGS as statsd names do.

#include <string>

#include "stats/event_sink.hpp"
#include "stats/tags.hpp"

namespace sluice::stats {

class stdout_sink final : public event_sink {
 public:
  // `fd`: where the lines go (stderr, as upstream; a pipe in tests).
  explicit stdout_sink(tag_list extra_tags, int fd = 2);

 private:
  void on_counter(const std::string& name, std::uint64_t delta) override;
  void on_gauge(const std::string& name, std::int64_t value) override;
  void on_timer(const std::string& name, double milliseconds, double sample_rate) override;
  void on_flush_end() override;
  void line(std::string_view msg, const std::string* name, std::string_view type, double value);

  tag_list extra_tags_;
  int fd_;
  std::string lines_;
};

// Go's encoding/json string: quotes, backslashes and control characters escaped, and <, >, & as \u003c... .
void append_go_json_string(std::string& out, std::string_view s);

}  // namespace sluice::stats
