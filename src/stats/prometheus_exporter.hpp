#pragma once
// The Prometheus sink (USE_PROMETHEUS): what upstream's embedded statsd_exporter serves, without the statsd
// round trip. Counters and gauges are read from the store at scrape time (the store's counters are already
// cumulative, as Prometheus wants them); timer observations land in lock-free histogram buckets as they
// happen, because the exporter is the store's timer_observer. Each stat is mapped once, when first seen, and
// bound to its output series; as in statsd_exporter, stats mapped to the same series add up, and one whose
// metric name is taken by another type (or a histogram with other buckets) is left out. render() writes text
// exposition format 0.0.4, families and series in name order, so two scrapes diff cleanly.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "stats/prometheus_mapper.hpp"
#include "stats/sink.hpp"
#include "stats/store.hpp"

namespace sluice::stats {

class prometheus_exporter final : public sink, public timer_observer {
 public:
  static constexpr std::string_view content_type = "text/plain; version=0.0.4; charset=utf-8";

  // The owner makes it the store's timer observer, and unsets that before destroying it.
  prometheus_exporter(store& stats, prometheus_mapper mapper);
  ~prometheus_exporter() override;
  prometheus_exporter(const prometheus_exporter&) = delete;
  prometheus_exporter& operator=(const prometheus_exporter&) = delete;

  void observe(timer& t, double milliseconds) override;
  // Nothing to push: Prometheus pulls, and render() reads the store itself.
  void flush(store&) override {}

  // The body of a scrape. Safe to call from several threads at once.
  std::string render();

 private:
  struct histogram;
  struct state;
  struct binding;
  binding bind(std::string_view stat, stat_type type);
  histogram& attach(timer& t);

  store& stats_;
  const prometheus_mapper mapper_;
  std::mutex mutex_;  // guards state_; not taken by an observation once its timer is attached
  std::unique_ptr<state> state_;
};

}  // namespace sluice::stats
