#pragma once
// A backend module: what BACKEND_TYPE chooses. Each backends/<name>/ has one (module.hpp there): it owns its
// settings (settings.hpp there), its start, one backend per worker (core::per_worker), its periodic work
// (sweeps, snapshots, SRV refresh, batched flushes), its drain and its stop. The composition root chooses one
// module (app/backend_choice.cpp, as upstream's runner.go switches over its caches) and calls only this.

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "core/clock.hpp"
#include "core/health.hpp"
#include "core/problem.hpp"
#include "core/workers.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "ratelimit/limiter/table_reader.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::backends {

// A process-wide total (REDIS_POOL_SIZE, MEMCACHE_MAX_IDLE_CONNS) shared out among the workers, each with at
// least one.
inline std::size_t share_of(std::size_t total, unsigned worker, unsigned workers) {
  return std::max<std::size_t>(1, total / workers + (worker < total % workers ? 1 : 0));
}

// What a module starts with (all outlive it).
struct start_context {
  core::worker_pool& workers;
  boost::asio::io_context& control;  // the control thread's: timers, file watches, the drain's end
  const core::clock& clock;
  core::health& health;
  stats::store& stats;
  // The backend cannot start (Redis: no connection within REDIS_STARTUP_MAX_ELAPSED_TIME): the process stops.
  std::function<void()> give_up;
};

class module {
 public:
  virtual ~module() = default;

  // Worker i's backend: used on worker i's thread only (the memory backend is one, shared and sharded).
  virtual limiter::backend& backend(unsigned worker) = 0;
  // LIMIT_TABLES_REDIS: worker i's reader of limit tables; null when the backend has none.
  virtual limiter::table_reader* table_reader(unsigned /*worker*/) { return nullptr; }
  // The quota service's demand exchange (RLQS): within this process unless the backend can share it between
  // replicas (Redis). `key_prefix` is CACHE_KEY_PREFIX.
  virtual std::unique_ptr<rlqs::demand_exchange> demand_exchange(const std::string& /*key_prefix*/) {
    return std::make_unique<rlqs::in_process_exchange>(worker_count_);
  }
  // At a stop, once the requests in flight are done: what is held back (batched hits) goes out, then `then`
  // runs on the control thread (at once when nothing is held back).
  virtual void drain(std::function<void()> then) { then(); }
  // On the control thread, last: timers end, connections close, state is written (the memory snapshot).
  virtual void stop() = 0;

 protected:
  explicit module(unsigned workers) : worker_count_(workers) {}
  unsigned worker_count_;
};

}  // namespace sluice::ratelimit::backends
