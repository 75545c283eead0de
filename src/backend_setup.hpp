#pragma once
// Part of the composition root (with main.cpp): the counter store BACKEND_TYPE chooses — the memory backend
// and its sweep, or the Redis stores with their health component and pool stats.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>

#include "core/clock.hpp"
#include "core/health.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/settings.hpp"
#include "redis/store.hpp"
#include "stats/store.hpp"

namespace sluice {

// The counter store chosen by BACKEND_TYPE, with what it needs kept alive.
struct backend_holder {
  std::unique_ptr<ratelimit::backends::memory::memory_backend> memory;
  std::unique_ptr<redis::store> redis_main;
  std::unique_ptr<redis::store> redis_per_second;
  std::unique_ptr<ratelimit::backends::redis::redis_backend> redis;
  std::unique_ptr<boost::asio::steady_timer> timer;  // memory: the sweep; redis: the start-up deadline

  ratelimit::limiter::backend& get() {
    if (memory) return *memory;
    return *redis;
  }
  void stop() {
    if (timer) timer->cancel();
    if (redis_main) redis_main->stop();
    if (redis_per_second) redis_per_second->stop();
  }
};

// Starts the backend on `ioc`. With Redis, `give_up` is called when no connection is made within
// REDIS_STARTUP_MAX_ELAPSED_TIME.
void start_backend(backend_holder& b, const ratelimit::module_settings& settings,
                   boost::asio::io_context& ioc, const core::clock& clock, core::health& health,
                   stats::store& stats, std::function<void()> give_up);

}  // namespace sluice
