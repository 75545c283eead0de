#include "stats/sink_factory.hpp"

#include "core/log.hpp"
#include "stats/statsd_sink.hpp"
#include "stats/stdout_sink.hpp"

namespace sluice::stats {

namespace {

// Go's Duration.String() for the common cases ("10s", "200ms", "1.5s").
std::string go_duration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return core::cat(d.count() / 1000, "s");
  if (d.count() < 1000) return core::cat(d.count(), "ms");
  return core::cat(static_cast<double>(d.count()) / 1000.0, "s");
}

}  // namespace

std::unique_ptr<flusher> start_line_sink(const sink_settings& settings, store& s) {
  const char* name = nullptr;
  switch (settings.kind) {
    case sink_kind::none:
      core::log_info("Stats disabled");
      return nullptr;
    case sink_kind::prometheus:
      return nullptr;
    case sink_kind::statsd:
      name = "statsd";
      break;
    case sink_kind::dogstatsd:
      name = "dogstatsd";
      break;
    case sink_kind::stdout_sink:
      name = "stdout";
      break;
  }
  if (settings.kind == sink_kind::stdout_sink && !settings.log_lines) {
    core::log_info(
        "Stats initialized for stdout: its lines are written at LOG_LEVEL=debug or with LOG_STATS=true");
    return nullptr;
  }
  auto f = std::make_unique<flusher>(s, settings.flush_interval);
  std::unique_ptr<event_sink> k;
  if (settings.kind == sink_kind::stdout_sink) {
    k = std::make_unique<stdout_sink>(settings.extra_tags);
  } else {
    k = std::make_unique<statsd_sink>(settings, f->executor());
  }
  auto* observer = k.get();
  f->start(std::move(k), observer);
  core::log_info("Stats initialized for ", name);
  core::log_info("Stats flush interval: ", go_duration(settings.flush_interval));
  return f;
}

}  // namespace sluice::stats
