#pragma once
// What gostats hands its sinks at each flush, computed once for every line-based sink: counters as the delta
// since the last flush (only when not zero), gauges as their current value, and every timer observation of
// the interval (buffered here as the store's timer observer), with the sample rate that keeps counts right
// when the buffer had to sample.

#include <cstdint>
#include <string>
#include <unordered_map>

#include "stats/sink.hpp"
#include "stats/timer_buffer.hpp"

namespace sluice::stats {

class event_sink : public sink, public timer_observer {
 public:
  explicit event_sink(std::size_t timer_capacity_per_shard = 8192) : timers_(timer_capacity_per_shard) {}

  void flush(store& s) final;
  void observe(timer& t, double milliseconds) final { timers_.add(t, milliseconds); }

 protected:
  virtual void on_counter(const std::string& name, std::uint64_t delta) = 0;
  virtual void on_gauge(const std::string& name, std::int64_t value) = 0;
  virtual void on_timer(const std::string& name, double milliseconds, double sample_rate) = 0;
  // After the last event of a flush.
  virtual void on_flush_end() = 0;

 private:
  void flush_timers(store& s);

  timer_buffer timers_;
  // Only the flushing thread touches these.
  std::unordered_map<const counter*, std::uint64_t> counters_sent_;
  std::unordered_map<const timer*, std::uint64_t> timer_counts_;
};

}  // namespace sluice::stats
