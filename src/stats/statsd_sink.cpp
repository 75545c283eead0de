#include "stats/statsd_sink.hpp"

namespace sluice::stats {

namespace {

bool is_dogstatsd(const sink_settings& s) {
  return s.kind == sink_kind::dogstatsd;
}

}  // namespace

statsd_sink::statsd_sink(const sink_settings& settings, boost::asio::any_io_executor executor)
    : format_(is_dogstatsd(settings), settings.extra_tags, settings.mogrifiers),
      transport_(std::move(executor), settings.statsd_host, settings.statsd_port,
                 is_dogstatsd(settings) || settings.statsd_udp) {}

void statsd_sink::on_flush_end() {
  if (lines_.empty()) return;
  transport_.send(std::move(lines_));
  lines_.clear();
}

}  // namespace sluice::stats
