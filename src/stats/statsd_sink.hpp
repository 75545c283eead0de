#pragma once
// The statsd (USE_STATSD) and DogStatsD (USE_DOG_STATSD) sinks: each flush's events as statsd lines, sent in
// one go at the end of the flush. DogStatsD always goes over UDP, as datadog-go does.

#include <boost/asio/any_io_executor.hpp>
#include <string>

#include "stats/event_sink.hpp"
#include "stats/sink_settings.hpp"
#include "stats/statsd_format.hpp"
#include "stats/statsd_transport.hpp"

namespace sluice::stats {

class statsd_sink final : public event_sink {
 public:
  // settings.kind is statsd or dogstatsd.
  statsd_sink(const sink_settings& settings, boost::asio::any_io_executor executor);

 private:
  void on_counter(const std::string& name, std::uint64_t delta) override {
    format_.counter(lines_, name, delta);
  }
  void on_gauge(const std::string& name, std::int64_t value) override { format_.gauge(lines_, name, value); }
  void on_timer(const std::string& name, double milliseconds, double sample_rate) override {
    format_.timer(lines_, name, milliseconds, sample_rate);
  }
  void on_flush_end() override;

  statsd_format format_;
  statsd_transport transport_;
  std::string lines_;
};

}  // namespace sluice::stats
