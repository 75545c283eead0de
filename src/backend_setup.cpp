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
                                 asio::steady_timer& timer, const bool& stopped) {
  for (;;) {
    timer.expires_after(std::chrono::milliseconds(250));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    // A stop may come after the wait ended but before this ran: the flag, not the cancel, ends the loop.
    if (ec || stopped) co_return;
    backend.sweep(ratelimit::backends::memory::memory_backend::shard_count / 8);
  }
}

// REDIS_POOL_SIZE is the process's total: the workers share it out, each with at least one connection.
std::size_t share_of(std::size_t pool_size, unsigned worker, unsigned workers) {
  return std::max<std::size_t>(1, pool_size / workers + (worker < pool_size % workers ? 1 : 0));
}

std::unique_ptr<redis::store> make_store(const ratelimit::redis_store_settings& s, asio::io_context& ioc,
                                         unsigned worker, unsigned workers) {
  const auto size = share_of(s.pool_size, worker, workers);
  if (!s.cluster_seeds.empty()) {
    return std::make_unique<redis::cluster>(ioc.get_executor(), s.connection, s.cluster_seeds, size);
  }
  return std::make_unique<redis::pool>(ioc.get_executor(), s.connection, size);
}

// upstream's pool stats, summed over the workers: gauge <prefix>cx_active, counters <prefix>cx_total and
// <prefix>cx_local_close.
void add_pool_stats(stats::store& stats, std::vector<const redis::store*> stores, const std::string& prefix) {
  struct last_counts {
    std::uint64_t opened = 0, closed_locally = 0;
  };
  auto& active = stats.get_gauge(prefix + "cx_active");
  auto& opened = stats.get_counter(prefix + "cx_total");
  auto& closed = stats.get_counter(prefix + "cx_local_close");
  stats.add_generator(
      [stores = std::move(stores), &active, &opened, &closed, last = last_counts{}]() mutable {
        redis::connection_stats now;
        for (const auto* s : stores) {
          const auto one = s->stats();
          now.active += one.active;
          now.opened += one.opened;
          now.closed_locally += one.closed_locally;
        }
        active.set(static_cast<std::int64_t>(now.active));
        // A cluster node that left the map takes its counts with it: never count backwards.
        if (now.opened > last.opened) opened.add(now.opened - last.opened);
        if (now.closed_locally > last.closed_locally) closed.add(now.closed_locally - last.closed_locally);
        last = {now.opened, now.closed_locally};
      });
}

void start_redis(backend_holder& b, const ratelimit::redis_settings& settings, core::worker_pool& workers,
                 asio::io_context& control, core::health& health, std::function<void()> give_up) {
  for (unsigned i = 0; i < workers.size(); ++i) {
    auto& w = b.redis.emplace_back();
    w.main = make_store(settings.main, workers.context(i), i, workers.size());
    if (settings.per_second)
      w.per_second = make_store(*settings.per_second, workers.context(i), i, workers.size());
    w.backend = std::make_unique<ratelimit::backends::redis::redis_backend>(*w.main, w.per_second.get());
  }
  // Healthy once every store has been reached; with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, only while each has
  // a live connection.
  auto component = health.add_component("redis", false);
  auto update = [&b, &health, component, follow = settings.health_check_active_connection] {
    bool up = b.redis_up();
    if (up || follow) health.set(component, up);
    // Each worker reconnects on its own backoff: once one is through, the others need not wait theirs out.
    if (!up) b.retry_down_stores();
  };
  core::log_info("connecting to redis on ", settings.main.connection.address, " with pool size ",
                 settings.main.pool_size, " shared by ", workers.size(), " workers");
  for (auto& w : b.redis) {
    w.main->start(update);
    if (w.per_second) w.per_second->start(update);
  }
  if (settings.startup_max_elapsed.count() > 0) {
    b.timer = std::make_unique<asio::steady_timer>(control, settings.startup_max_elapsed);
    b.timer->async_wait([&b, give_up = std::move(give_up), settings](const boost::system::error_code& ec) {
      if (ec || b.redis_up()) return;
      core::log_error("timed out waiting for Redis connection to ", settings.main.connection.address,
                      " after ", settings.startup_max_elapsed.count(),
                      "ms: ", b.redis.front().main->last_error());
      give_up();
    });
  }
}

}  // namespace

bool backend_holder::redis_up() const {
  for (const auto& w : redis) {
    if (!w.main->up() || (w.per_second && !w.per_second->up())) return false;
  }
  return !redis.empty();
}

void backend_holder::retry_down_stores() {
  std::vector<redis::store*> down;
  bool any_up = false;
  for (auto& w : redis) {
    for (auto* s : {w.main.get(), w.per_second.get()}) {
      if (s == nullptr) continue;
      if (s->up()) {
        any_up = true;
      } else {
        down.push_back(s);
      }
    }
  }
  if (any_up)
    for (auto* s : down) s->retry_now();
}

void backend_holder::stop() {
  stopped = true;
  if (timer) timer->cancel();
  for (auto& w : redis) {
    w.main->stop();
    if (w.per_second) w.per_second->stop();
  }
}

void start_backend(backend_holder& b, const ratelimit::module_settings& settings, core::worker_pool& workers,
                   asio::io_context& control, const core::clock& clock, core::health& health,
                   stats::store& stats, std::function<void()> give_up) {
  if (settings.backend_type == "memory") {
    b.memory =
        std::make_unique<ratelimit::backends::memory::memory_backend>(clock, settings.memory_max_counters);
    b.timer = std::make_unique<asio::steady_timer>(control);
    asio::co_spawn(control, sweep_loop(*b.memory, *b.timer, b.stopped), asio::detached);
    return;
  }
  start_redis(b, settings.redis, workers, control, health, std::move(give_up));
  std::vector<const redis::store*> main, per_second;
  for (const auto& w : b.redis) {
    main.push_back(w.main.get());
    if (w.per_second) per_second.push_back(w.per_second.get());
  }
  add_pool_stats(stats, std::move(main), "ratelimit.redis_pool.");
  if (!per_second.empty()) add_pool_stats(stats, std::move(per_second), "ratelimit.redis_per_second_pool.");
}

}  // namespace sluice
