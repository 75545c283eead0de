#pragma once
// BACKEND_TYPE=memcache as a module (backends/module.hpp): one memcached client per worker (each with its
// share of MEMCACHE_MAX_IDLE_CONNS per node and its own TLS context), MEMCACHE_SRV's refresh on the control
// thread, and upstream's ratelimit.memcache.* counters summed over the workers.

#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/per_worker.hpp"
#include "memcache/client.hpp"
#include "ratelimit/backends/memcache/memcache_backend.hpp"
#include "ratelimit/backends/memcache/settings.hpp"
#include "ratelimit/backends/module.hpp"

namespace sluice::ratelimit::backends::memcache {

class memcache_module final : public module {
 public:
  // Throws core::settings_error when MEMCACHE_SRV cannot be resolved at start.
  memcache_module(const memcache_settings& settings, const start_context& context);

  limiter::backend& backend(unsigned worker) override { return *workers_[worker].backend; }
  std::unique_ptr<rlqs::demand_exchange> demand_exchange(const std::string& key_prefix) override;
  void stop() override;

 private:
  // One worker's client and the backend over it.
  struct worker {
    std::unique_ptr<sluice::memcache::client> client;
    std::unique_ptr<memcache_backend> backend;
  };

  boost::asio::awaitable<void> srv_refresh_loop(std::vector<std::string> current);
  void add_stats(stats::store& stats);

  memcache_settings settings_;
  core::per_worker<worker> workers_;
  boost::asio::steady_timer srv_timer_;
  bool stopped_ = false;  // on the control thread
};

}  // namespace sluice::ratelimit::backends::memcache
