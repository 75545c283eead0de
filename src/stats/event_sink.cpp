#include "stats/event_sink.hpp"

namespace sluice::stats {

void event_sink::flush(store& s) {
  s.for_each_counter([this](const std::string& name, const counter& c) {
    auto& sent = counters_sent_[&c];
    auto value = c.value();
    if (value == sent) return;
    on_counter(name, value - sent);
    sent = value;
  });
  s.for_each_gauge([this](const std::string& name, const gauge& g) { on_gauge(name, g.value()); });
  flush_timers(s);
  on_flush_end();
}

void event_sink::flush_timers(store& s) {
  auto batch = timers_.take();
  // Observations per timer in this interval, from the timer's own count: what the kept values stand for.
  std::unordered_map<const timer*, std::uint64_t> seen;
  s.for_each_timer([&](const std::string&, timer& t) {
    auto& last = timer_counts_[&t];
    auto count = t.count();
    if (batch.sampled) seen[&t] = count - last;
    last = count;
  });
  std::unordered_map<const timer*, std::uint64_t> kept;
  if (batch.sampled) {
    for (const auto& o : batch.kept) ++kept[o.t];
  }
  for (const auto& o : batch.kept) {
    double rate = 1.0;
    if (batch.sampled) {
      auto n = seen[o.t];
      if (n > kept[o.t]) rate = static_cast<double>(kept[o.t]) / static_cast<double>(n);
    }
    on_timer(o.t->name(), o.milliseconds, rate);
  }
}

}  // namespace sluice::stats
