#pragma once
// Starts the sink the settings chose, with upstream's start-up log lines ("Stats initialized for statsd",
// ...).

#include <memory>

#include "stats/flusher.hpp"
#include "stats/sink_settings.hpp"
#include "stats/store.hpp"

namespace sluice::stats {

// statsd, DogStatsD or stdout: a running flusher that owns the sink (keep it until the request threads have
// stopped). nullptr for none (DISABLE_STATS) and for Prometheus, which is served by its own listener.
std::unique_ptr<flusher> start_line_sink(const sink_settings& settings, store& s);

}  // namespace sluice::stats
