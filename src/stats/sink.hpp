#pragma once
// The active stats sink. The flusher calls flush() every STATS_FLUSH_INTERVAL (after the store's generators
// ran); a sink that also wants each timer observation is the store's timer_observer.

#include "stats/store.hpp"

namespace sluice::stats {

class sink {
 public:
  virtual ~sink() = default;
  virtual void flush(store& s) = 0;
};

}  // namespace sluice::stats
