#include "backend_setup.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/log.hpp"
#include "redis/cluster.hpp"
#include "redis/pool.hpp"

namespace sluice {

namespace asio = boost::asio;

namespace {

// Sweeps expired memory counters a few shards at a time, so no sweep holds up requests for long.
asio::awaitable<void> sweep_loop(ratelimit::backends::memory::memory_backend& backend,
                                 asio::steady_timer& timer) {
  for (;;) {
    timer.expires_after(std::chrono::milliseconds(250));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    backend.sweep(ratelimit::backends::memory::memory_backend::shard_count / 8);
  }
}

std::unique_ptr<redis::store> make_store(const ratelimit::redis_store_settings& s, asio::io_context& ioc) {
  if (!s.cluster_seeds.empty()) {
    return std::make_unique<redis::cluster>(ioc.get_executor(), s.connection, s.cluster_seeds, s.pool_size);
  }
  return std::make_unique<redis::pool>(ioc.get_executor(), s.connection, s.pool_size);
}

// upstream's pool stats: gauge <prefix>cx_active, counters <prefix>cx_total and <prefix>cx_local_close.
void add_pool_stats(stats::store& stats, const redis::store& store, const std::string& prefix) {
  struct last_counts {
    std::uint64_t opened = 0, closed_locally = 0;
  };
  auto& active = stats.get_gauge(prefix + "cx_active");
  auto& opened = stats.get_counter(prefix + "cx_total");
  auto& closed = stats.get_counter(prefix + "cx_local_close");
  stats.add_generator([&store, &active, &opened, &closed, last = last_counts{}]() mutable {
    const auto now = store.stats();
    active.set(static_cast<std::int64_t>(now.active));
    // A cluster node that left the map takes its counts with it: never count backwards.
    if (now.opened > last.opened) opened.add(now.opened - last.opened);
    if (now.closed_locally > last.closed_locally) closed.add(now.closed_locally - last.closed_locally);
    last = {now.opened, now.closed_locally};
  });
}

void start_redis(backend_holder& b, const ratelimit::redis_settings& settings, asio::io_context& ioc,
                 core::health& health, std::function<void()> give_up) {
  b.redis_main = make_store(settings.main, ioc);
  if (settings.per_second) b.redis_per_second = make_store(*settings.per_second, ioc);
  b.redis =
      std::make_unique<ratelimit::backends::redis::redis_backend>(*b.redis_main, b.redis_per_second.get());
  // Healthy once every store has been reached; with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, only while each has
  // a live connection.
  auto component = health.add_component("redis", false);
  auto update = [&b, &health, component, follow = settings.health_check_active_connection] {
    bool up = b.redis_main->up() && (!b.redis_per_second || b.redis_per_second->up());
    if (up || follow) health.set(component, up);
  };
  core::log_info("connecting to redis on ", settings.main.connection.address, " with pool size ",
                 settings.main.pool_size);
  b.redis_main->start(update);
  if (b.redis_per_second) b.redis_per_second->start(update);
  if (settings.startup_max_elapsed.count() > 0) {
    b.timer = std::make_unique<asio::steady_timer>(ioc, settings.startup_max_elapsed);
    b.timer->async_wait([&b, give_up = std::move(give_up), settings](const boost::system::error_code& ec) {
      if (ec || b.redis_main->up()) return;
      core::log_error("timed out waiting for Redis connection to ", settings.main.connection.address,
                      " after ", settings.startup_max_elapsed.count(), "ms: ", b.redis_main->last_error());
      give_up();
    });
  }
}

}  // namespace

void start_backend(backend_holder& b, const ratelimit::module_settings& settings, asio::io_context& ioc,
                   const core::clock& clock, core::health& health, stats::store& stats,
                   std::function<void()> give_up) {
  if (settings.backend_type == "memory") {
    b.memory =
        std::make_unique<ratelimit::backends::memory::memory_backend>(clock, settings.memory_max_counters);
    b.timer = std::make_unique<asio::steady_timer>(ioc);
    asio::co_spawn(ioc, sweep_loop(*b.memory, *b.timer), asio::detached);
    return;
  }
  start_redis(b, settings.redis, ioc, health, std::move(give_up));
  add_pool_stats(stats, *b.redis_main, "ratelimit.redis_pool.");
  if (b.redis_per_second) add_pool_stats(stats, *b.redis_per_second, "ratelimit.redis_per_second_pool.");
}

}  // namespace sluice
