#pragma once
// The calendar windows a limiter last used (config/calendar.hpp): a zone's rules are looked up once per
// window and limit shape, not per decision. A few entries, the oldest dropped first. Per worker: each
// worker's service holds its own and hands it to the shared limiter in `work::calendars`, so the decision
// path changes it without a lock and no other thread ever sees it.

#include <cstdint>
#include <vector>

#include "ratelimit/config/calendar.hpp"

namespace sluice::ratelimit::limiter {

class calendar_cache {
 public:
  // The window of `multiplier` × `u` in `zone` that holds `now` (Unix seconds).
  config::calendar_window at(const date::time_zone& zone, config::unit u, std::uint32_t multiplier,
                             std::int64_t now) {
    for (const auto& e : entries_) {
      if (e.zone == &zone && e.unit == u && e.multiplier == multiplier && e.window.start <= now &&
          now < e.window.end)
        return e.window;
    }
    const auto window = config::calendar_window_at(zone, u, multiplier, now);
    if (entries_.size() >= max_entries) entries_.erase(entries_.begin());
    entries_.push_back({&zone, u, multiplier, window});
    return window;
  }

  std::size_t size() const { return entries_.size(); }
  static constexpr std::size_t max_entries = 16;

 private:
  struct entry {
    const date::time_zone* zone;
    config::unit unit;
    std::uint32_t multiplier;
    config::calendar_window window;
  };
  std::vector<entry> entries_;
};

}  // namespace sluice::ratelimit::limiter
