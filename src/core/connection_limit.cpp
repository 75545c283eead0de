#include "core/connection_limit.hpp"

#include "core/log.hpp"

namespace sluice::core {

connection_limit::slot connection_limit::try_acquire() {
  auto used = used_.load(std::memory_order_relaxed);
  do {
    if (used >= max_) {
      if (!refusing_.exchange(true, std::memory_order_relaxed))
        log_warn("MAX_CONNECTIONS (", max_, ") reached: new connections are closed until some end");
      return slot();
    }
  } while (!used_.compare_exchange_weak(used, used + 1, std::memory_order_relaxed));
  if (refusing_.load(std::memory_order_relaxed) && refusing_.exchange(false, std::memory_order_relaxed))
    log_warn("Below MAX_CONNECTIONS (", max_, ") again: accepting new connections");
  return slot(this);
}

}  // namespace sluice::core
