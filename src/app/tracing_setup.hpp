#pragma once
// Part of the composition root (with main.cpp): tracing, when TRACING_ENABLED — the sampler, one tracer and
// span queue per worker, and the exporter (OTLP over HTTP or gRPC) on the control thread.

#include <boost/asio/io_context.hpp>
#include <memory>
#include <vector>

#include "stats/store.hpp"
#include "tracing/exporter.hpp"
#include "tracing/sampler.hpp"
#include "tracing/settings.hpp"
#include "tracing/tracer.hpp"

namespace sluice {

struct tracing_holder {
  std::unique_ptr<tracing::sampler> sampler;
  std::unique_ptr<tracing::batch_exporter> exporter;
  std::vector<std::unique_ptr<tracing::tracer>> tracers;  // one per worker

  // The worker's tracer; null when tracing is off.
  tracing::tracer* tracer(unsigned worker) const { return tracers.empty() ? nullptr : tracers[worker].get(); }
  // On the control thread.
  void start(boost::asio::io_context& control) const;
  void stop() const;
};

// Logs what it starts, as upstream does ("Tracing disabled" when off). Throws std::runtime_error naming the
// setting of a certificate file that cannot be loaded.
tracing_holder make_tracing(const tracing::settings& settings, unsigned workers,
                            boost::asio::io_context& control, stats::store& stats);

}  // namespace sluice
