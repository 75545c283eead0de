#pragma once
// The debug server's /stats page: every stat's current value, one "<name>: <value>" line each, sorted by
// name. Counters show their running total, gauges their value, timers "count=<n> sum_ms=<total>".

#include <string>

#include "stats/store.hpp"

namespace sluice::stats {

std::string text_dump(store& s);

}  // namespace sluice::stats
