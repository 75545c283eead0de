#pragma once
// Part of the composition root (with main.cpp): the counter store BACKEND_TYPE chooses — the memory backend
// (one store shared by every worker, so counts are exact) and its sweep, or, for Redis, one set of stores per
// worker (each worker's decisions use its own connections and pipelines), with the health component and the
// pool stats summed over the workers.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "core/clock.hpp"
#include "core/health.hpp"
#include "core/workers.hpp"
#include "memcache/client.hpp"
#include "ratelimit/backends/memcache/memcache_backend.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/backends/redis/synced_backend.hpp"
#include "ratelimit/backends/redis/table_reader.hpp"
#include "ratelimit/settings.hpp"
#include "redis/credentials.hpp"
#include "redis/store.hpp"
#include "stats/store.hpp"

namespace sluice {

// One Redis store (a pool, or a cluster client) on `ioc`, with the worker's share of REDIS_POOL_SIZE.
std::unique_ptr<redis::store> make_store(const ratelimit::redis_store_settings& s,
                                         boost::asio::io_context& ioc, unsigned worker, unsigned workers);

// One worker's Redis: its stores and the backend over them.
struct worker_redis {
  std::unique_ptr<redis::store> main;
  std::unique_ptr<redis::store> per_second;
  std::unique_ptr<ratelimit::backends::redis::redis_backend> backend;
  std::unique_ptr<ratelimit::backends::redis::synced_backend> synced;      // REDIS_SYNC_INTERVAL > 0
  std::unique_ptr<ratelimit::backends::redis::redis_table_reader> tables;  // LIMIT_TABLES_REDIS, on `main`
};

// One worker's memcached client and the backend over it.
struct worker_memcache {
  std::unique_ptr<memcache::client> client;
  std::unique_ptr<ratelimit::backends::memcache::memcache_backend> backend;
};

// The counter store chosen by BACKEND_TYPE, with what it needs kept alive.
struct backend_holder {
  std::unique_ptr<ratelimit::backends::memory::memory_backend> memory;
  // Before the workers' backends, which count into it: destroyed after them.
  std::unique_ptr<ratelimit::backends::redis::sync_stats> sync_stats;  // REDIS_SYNC_INTERVAL > 0
  std::vector<worker_redis> redis;                                     // one per worker
  std::vector<worker_memcache> memcache;                               // one per worker
  // REDIS_AUTH_FILE and the like: watched on the control thread while the stores run.
  std::vector<std::shared_ptr<redis::credential_file>> secrets;
  // memory: the sweep; redis: the start-up deadline; memcache: the SRV refresh
  std::unique_ptr<boost::asio::steady_timer> timer;
  bool stopped = false;  // set by stop(), on the control thread
  // MEMORY_SNAPSHOT_FILE ("" = none), its writes every MEMORY_SNAPSHOT_INTERVAL, and the clock they read.
  std::string snapshot_file;
  std::unique_ptr<boost::asio::steady_timer> snapshot_timer;
  const core::clock* clock = nullptr;

  // LIMIT_TABLES_REDIS: the worker's reader of Redis limit tables; null otherwise.
  ratelimit::limiter::table_reader* table_reader(unsigned worker) {
    return worker < redis.size() ? redis[worker].tables.get() : nullptr;
  }
  ratelimit::limiter::backend& get(unsigned worker) {
    if (memory) return *memory;
    if (!memcache.empty()) return *memcache[worker].backend;
    if (redis[worker].synced) return *redis[worker].synced;
    return *redis[worker].backend;
  }
  // Every worker's main store (and per-second store, if any) is up.
  bool redis_up() const;
  // Some stores are up and others wait to retry: those retry now.
  void retry_down_stores();
  // REDIS_SYNC_INTERVAL: sends every worker's unsent hits, then calls `then` on `control` once all are
  // answered (or Redis failed); at once without it.
  void drain(boost::asio::io_context& control, std::function<void()> then);
  // MEMORY_SNAPSHOT_FILE: writes the memory backend's counters, logging what it wrote (at info when `final`,
  // the write at stop; at debug every interval) or why it could not.
  void write_snapshot(bool final) const;
  // On the control thread. Writes the snapshot last (the requests in flight have finished).
  void stop();
};

// Starts the backend: Redis or memcached connections on the workers' io_contexts, timers on `control`. With
// Redis, `give_up` is called when no connection is made within REDIS_STARTUP_MAX_ELAPSED_TIME. Throws
// core::settings_error when MEMCACHE_SRV cannot be resolved at start.
void start_backend(backend_holder& b, const ratelimit::module_settings& settings, core::worker_pool& workers,
                   boost::asio::io_context& control, const core::clock& clock, core::health& health,
                   stats::store& stats, std::function<void()> give_up);

}  // namespace sluice
