#pragma once
// BACKEND_TYPE=redis as a module (backends/module.hpp): per worker, its stores (a pool or a cluster client on
// the worker's io_context, with its share of REDIS_POOL_SIZE) and the backend over them — direct, or batched
// with REDIS_SYNC_INTERVAL — and, with LIMIT_TABLES_REDIS, its reader of limit tables. On the control thread:
// the "redis" health component, REDIS_STARTUP_MAX_ELAPSED_TIME, the *_AUTH_FILE watches, the pool and sync
// stats summed over the workers, the RLQS demand exchange between replicas, and with REDIS_REGION the reader
// of the other regions' totals (region_reader), whose views reach each worker's regional_backend.

#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <vector>

#include "core/per_worker.hpp"
#include "ratelimit/backends/module.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/backends/redis/region_reader.hpp"
#include "ratelimit/backends/redis/regional_backend.hpp"
#include "ratelimit/backends/redis/settings.hpp"
#include "ratelimit/backends/redis/synced_backend.hpp"
#include "ratelimit/backends/redis/table_reader.hpp"
#include "redis/credentials.hpp"
#include "redis/store.hpp"

namespace sluice::ratelimit::backends::redis {

class redis_module final : public module {
 public:
  redis_module(const redis_settings& settings, const start_context& context);

  limiter::backend& backend(unsigned worker) override;
  limiter::table_reader* table_reader(unsigned worker) override { return workers_[worker].tables.get(); }
  std::unique_ptr<rlqs::demand_exchange> demand_exchange(const std::string& key_prefix) override;
  // REDIS_SYNC_INTERVAL: sends every worker's unsent hits; `then` once all are answered (or Redis failed).
  void drain(std::function<void()> then) override;
  void stop() override;

 private:
  // One worker's Redis: its stores and the backend over them.
  struct worker {
    boost::asio::io_context* io = nullptr;  // this worker's
    std::unique_ptr<sluice::redis::store> main;
    std::unique_ptr<sluice::redis::store> per_second;
    std::unique_ptr<redis_backend> backend;
    std::unique_ptr<synced_backend> synced;      // REDIS_SYNC_INTERVAL > 0
    std::unique_ptr<redis_table_reader> tables;  // LIMIT_TABLES_REDIS, on `main`
    std::unique_ptr<regional_backend> regional;  // REDIS_REGION: over `synced` or `backend`
  };

  void start_stores(const start_context& context);
  void start_sync(const start_context& context);
  void start_regions(const start_context& context);
  void watch_secrets(boost::asio::io_context& control);
  // Every worker's main store (and per-second store, if any) is up.
  bool up() const;
  // Some stores are up and others wait to retry: those retry now.
  void retry_down_stores();

  redis_settings settings_;
  boost::asio::io_context& control_;
  const core::clock& clock_;  // the RLQS exchange dates its fields by it
  // Before the workers' backends, which count into it: destroyed after them.
  std::unique_ptr<sync_stats> sync_stats_;  // REDIS_SYNC_INTERVAL > 0
  // REDIS_REGION. Before the workers' backends too: their key -> slot maps point into its keys.
  std::unique_ptr<region_reader> regions_;
  core::per_worker<worker> workers_;
  // REDIS_AUTH_FILE and the like: watched on the control thread while the stores run.
  std::vector<std::shared_ptr<sluice::redis::credential_file>> secrets_;
  boost::asio::steady_timer startup_timer_;  // REDIS_STARTUP_MAX_ELAPSED_TIME
};

}  // namespace sluice::ratelimit::backends::redis
