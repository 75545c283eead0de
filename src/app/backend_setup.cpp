#include "backend_setup.hpp"

#include <algorithm>
#include <chrono>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "core/counted.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"
#include "memcache/srv_lookup.hpp"
#include "ratelimit/backends/memory/snapshot_file.hpp"
#include "redis/cluster.hpp"
#include "redis/pool.hpp"

namespace sluice {

namespace asio = boost::asio;

namespace {

// REDIS_POOL_SIZE is the process's total: the workers share it out, each with at least one connection.
std::size_t share_of(std::size_t pool_size, unsigned worker, unsigned workers) {
  return std::max<std::size_t>(1, pool_size / workers + (worker < pool_size % workers ? 1 : 0));
}

// Sweeps expired memory counters a few shards at a time, so no sweep holds up requests for long.
asio::awaitable<void> sweep_loop(ratelimit::backends::memory::memory_backend& backend,
                                 asio::steady_timer& timer, const bool& stopped) {
  for (;;) {
    timer.expires_after(std::chrono::milliseconds(250));
    auto [ec] = co_await timer.async_wait(core::use_tuple);
    // A stop may come after the wait ended but before this ran: the flag, not the cancel, ends the loop.
    if (ec || stopped) co_return;
    backend.sweep(ratelimit::backends::memory::memory_backend::shard_count / 8);
  }
}

// MEMORY_SNAPSHOT_INTERVAL: the counters written every interval, so a crash loses at most one interval's.
// The writes keep to a fixed rate (each deadline one interval after the last, not after the last write
// ended), so a write's own time does not stretch the gap; one that took longer than an interval is followed
// at once.
asio::awaitable<void> snapshot_loop(const backend_holder& b, asio::steady_timer& timer,
                                    std::chrono::milliseconds interval) {
  auto deadline = std::chrono::steady_clock::now() + interval;
  for (;;) {
    timer.expires_at(deadline);
    auto [ec] = co_await timer.async_wait(core::use_tuple);
    if (ec || b.stopped) co_return;
    b.write_snapshot(false);
    deadline = std::max(deadline + interval, std::chrono::steady_clock::now());
  }
}

// MEMORY_SNAPSHOT_FILE: its folder must take files (else the start stops), the counters it holds come back,
// and it is written every interval when one is set.
void start_snapshots(backend_holder& b, const ratelimit::module_settings& settings,
                     asio::io_context& control) {
  namespace memory = ratelimit::backends::memory;
  const auto& file = settings.memory_snapshot_file;
  if (auto error = memory::check_snapshot_folder(file))
    throw core::settings_error(core::cat("MEMORY_SNAPSHOT_FILE: ", *error));
  b.snapshot_file = file;
  const auto restored = memory::restore_snapshot(*b.memory, file, b.clock->now_seconds());
  if (restored.error) {
    core::log_warn("MEMORY_SNAPSHOT_FILE ", file, " cannot be read: ", *restored.error,
                   "; starting with no counters (the next write replaces it)");
  } else if (!restored.missing) {
    core::log_info("restored ", core::counted(restored.result.counters, "counter", "counters"), " from ",
                   file, " (", restored.result.dropped, " dropped: their windows had ended) in ",
                   static_cast<std::int64_t>(restored.result.milliseconds), " ms");
  }
  if (settings.memory_snapshot_interval.count() > 0) {
    b.snapshot_timer = std::make_unique<asio::steady_timer>(control);
    asio::co_spawn(control, snapshot_loop(b, *b.snapshot_timer, settings.memory_snapshot_interval),
                   asio::detached);
  }
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

// REDIS_SYNC_INTERVAL: each worker decides from its own view of the counters and sends its hits in batches.
void start_redis_sync(backend_holder& b, const ratelimit::redis_settings& settings,
                      core::worker_pool& workers, const core::clock& clock, stats::store& stats) {
  namespace rr = ratelimit::backends::redis;
  b.sync_stats = std::make_unique<rr::sync_stats>(stats);
  static const core::steady_clock steady;
  const rr::synced_backend::options options{
      settings.sync_interval, std::max<std::size_t>(1, settings.sync_max_keys / workers.size())};
  for (unsigned i = 0; i < workers.size(); ++i) {
    auto& w = b.redis[i];
    w.synced =
        std::make_unique<rr::synced_backend>(workers.context(i).get_executor(), *w.backend, *w.main,
                                             w.per_second.get(), clock, options, *b.sync_stats, &steady);
    w.synced->start();
  }
  auto& unsent = stats.get_gauge("ratelimit.redis_sync.pending_hits");
  auto& keys = stats.get_gauge("ratelimit.redis_sync.keys");
  stats.add_generator([&b, &unsent, &keys] {
    std::int64_t hits = 0, held = 0;
    for (const auto& w : b.redis) {
      hits += w.synced->unsent_hits();
      held += static_cast<std::int64_t>(w.synced->keys());
    }
    unsent.set(hits);
    keys.set(held);
  });
  core::log_info("REDIS_SYNC_INTERVAL=", settings.sync_interval.count(),
                 "ms: counters are decided locally and their hits sent to Redis in batches");
}

void start_redis(backend_holder& b, const ratelimit::redis_settings& settings, core::worker_pool& workers,
                 asio::io_context& control, core::health& health, std::function<void()> give_up) {
  for (unsigned i = 0; i < workers.size(); ++i) {
    auto& w = b.redis.emplace_back();
    w.main = make_store(settings.main, workers.context(i), i, workers.size());
    if (settings.per_second)
      w.per_second = make_store(*settings.per_second, workers.context(i), i, workers.size());
    w.backend = std::make_unique<ratelimit::backends::redis::redis_backend>(workers.context(i).get_executor(),
                                                                            *w.main, w.per_second.get());
    if (settings.limit_tables)
      w.tables = std::make_unique<ratelimit::backends::redis::redis_table_reader>(*w.main);
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

// The nodes at start: MEMCACHE_HOST_PORT, or what MEMCACHE_SRV names now (upstream panics when it cannot).
std::vector<std::string> initial_memcache_servers(const ratelimit::memcache_settings& s) {
  if (s.srv.empty()) return s.host_port;
  auto found = memcache::lookup_srv(s.srv, s.srv_dns_server);
  if (!found) throw core::settings_error(core::cat("Unable to fetch servers from SRV: ", found.error()));
  return *found;
}

// MEMCACHE_SRV_REFRESH: looks the record up again on the control thread; a new list goes to every worker's
// client, a failed lookup keeps the last list.
asio::awaitable<void> srv_refresh_loop(backend_holder& b, ratelimit::memcache_settings s,
                                       std::vector<std::string> current, core::worker_pool& workers) {
  for (;;) {
    b.timer->expires_after(s.srv_refresh);
    auto [ec] = co_await b.timer->async_wait(core::use_tuple);
    if (ec || b.stopped) co_return;
    auto found = memcache::lookup_srv(s.srv, s.srv_dns_server);
    if (!found) {
      core::log_error("Unable to refresh memcached servers from SRV, keeping the last ", current.size(), ": ",
                      found.error());
      continue;
    }
    if (*found == current) continue;
    current = *found;
    core::log_warn("memcached servers from SRV ", s.srv, ": ", core::join(current, ","));
    for (unsigned i = 0; i < workers.size(); ++i) {
      asio::post(workers.context(i),
                 [client = b.memcache[i].client.get(), list = current] { client->set_servers(list); });
    }
  }
}

void start_memcache(backend_holder& b, const ratelimit::memcache_settings& settings,
                    core::worker_pool& workers, asio::io_context& control, const core::clock& clock) {
  memcache::client_config config;
  config.servers = initial_memcache_servers(settings);
  config.connection.skip_hostname_verification = settings.tls.skip_hostname_verification;
  core::log_info("connecting to memcached on ", core::join(config.servers, ","), " with ",
                 settings.max_idle_conns, " connections per node shared by ", workers.size(), " workers");
  for (unsigned i = 0; i < workers.size(); ++i) {
    auto c = config;
    c.connections_per_node = share_of(settings.max_idle_conns, i, workers.size());
    // One TLS context per worker: a context's certificate store is not shared between threads (as each Redis
    // connection has its own).
    c.connection.tls = core::make_tls_client_context(
        settings.tls, {"MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY"});
    auto& w = b.memcache.emplace_back();
    w.client = std::make_unique<memcache::client>(workers.context(i).get_executor(), std::move(c));
    w.backend = std::make_unique<ratelimit::backends::memcache::memcache_backend>(*w.client, clock);
    w.client->start();
  }
  if (!settings.srv.empty() && settings.srv_refresh.count() > 0) {
    b.timer = std::make_unique<asio::steady_timer>(control);
    asio::co_spawn(control, srv_refresh_loop(b, settings, config.servers, workers), asio::detached);
  }
}

// upstream's ratelimit.memcache.* counters, summed over the workers.
void add_memcache_stats(stats::store& stats, const backend_holder& b) {
  using counts = ratelimit::backends::memcache::memcache_counts;
  struct stat {
    std::atomic<std::uint64_t> counts::*field;
    stats::counter* counter;
    std::uint64_t last = 0;
  };
  std::vector<stat> list;
  for (auto [field, name] :
       std::initializer_list<std::pair<std::atomic<std::uint64_t> counts::*, const char*>>{
           {&counts::multiget_success, "multiget.__code=success"},
           {&counts::multiget_error, "multiget.__code=error"},
           {&counts::increment_success, "increment.__code=success"},
           {&counts::increment_miss, "increment.__code=miss"},
           {&counts::increment_error, "increment.__code=error"},
           {&counts::add_success, "add.__code=success"},
           {&counts::add_error, "add.__code=error"},
           {&counts::add_not_stored, "add.__code=not_stored"},
           {&counts::keys_requested, "keys_requested"},
           {&counts::keys_found, "keys_found"}}) {
    list.push_back({field, &stats.get_counter(std::string("ratelimit.memcache.") + name)});
  }
  stats.add_generator([&b, list = std::move(list)]() mutable {
    for (auto& s : list) {
      std::uint64_t now = 0;
      for (const auto& w : b.memcache) now += (w.backend->counts().*s.field).load(std::memory_order_relaxed);
      if (now > s.last) s.counter->add(now - s.last);
      s.last = now;
    }
  });
}

}  // namespace

std::unique_ptr<redis::store> make_store(const ratelimit::redis_store_settings& s, asio::io_context& ioc,
                                         unsigned worker, unsigned workers) {
  const auto size = share_of(s.pool_size, worker, workers);
  if (!s.cluster_seeds.empty()) {
    return std::make_unique<redis::cluster>(ioc.get_executor(), s.connection, s.cluster_seeds, size);
  }
  return std::make_unique<redis::pool>(ioc.get_executor(), s.connection, size);
}

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

void backend_holder::drain(asio::io_context& control, std::function<void()> then) {
  if (!sync_stats) return then();
  // The last worker to be drained posts `then`.
  auto left = std::make_shared<std::atomic<std::size_t>>(redis.size());
  auto last = [left, &control, lost = &sync_stats->lost_at_stop, then = std::move(then)] {
    if (left->fetch_sub(1) != 1) return;
    if (const auto hits = lost->load(); hits != 0) {
      core::log_error("stopping with ", hits, hits == 1 ? " hit" : " hits",
                      " that Redis has not acknowledged: they are lost");
    }
    asio::post(control, then);
  };
  for (auto& w : redis) {
    asio::post(w.synced->executor(), [&w, last] { w.synced->drain(last); });
  }
}

void backend_holder::write_snapshot(bool final) const {
  if (!memory || snapshot_file.empty()) return;
  try {
    const auto wrote =
        ratelimit::backends::memory::write_snapshot(*memory, snapshot_file, clock->now_seconds());
    const auto line = core::cat("wrote ", core::counted(wrote.counters, "counter", "counters"), " to ",
                                snapshot_file, " in ", static_cast<std::int64_t>(wrote.milliseconds), " ms");
    // Every interval would fill an info log; the one at stop says what the next start will find.
    if (final) {
      core::log_info(line);
    } else {
      core::log_debug(line);
    }
  } catch (const std::exception& e) {
    core::log_error("MEMORY_SNAPSHOT_FILE: ", e.what());
  }
}

void backend_holder::stop() {
  stopped = true;
  if (timer) timer->cancel();
  if (snapshot_timer) snapshot_timer->cancel();
  write_snapshot(true);
  for (auto& w : redis) {
    if (w.synced) w.synced->stop();
    w.main->stop();
    if (w.per_second) w.per_second->stop();
  }
  for (auto& w : memcache) w.client->stop();
  for (auto& secret : secrets) secret->stop();
}

void start_backend(backend_holder& b, const ratelimit::module_settings& settings, core::worker_pool& workers,
                   asio::io_context& control, const core::clock& clock, core::health& health,
                   stats::store& stats, std::function<void()> give_up) {
  if (settings.backend_type == "memory") {
    b.memory =
        std::make_unique<ratelimit::backends::memory::memory_backend>(clock, settings.memory_max_counters);
    b.clock = &clock;
    if (!settings.memory_snapshot_file.empty()) start_snapshots(b, settings, control);
    b.timer = std::make_unique<asio::steady_timer>(control);
    asio::co_spawn(control, sweep_loop(*b.memory, *b.timer, b.stopped), asio::detached);
    return;
  }
  if (settings.backend_type == "memcache") {
    // No health component: a node that is down fails only the decisions whose keys it holds (upstream meant
    // the same, but its health never turns healthy with this backend).
    start_memcache(b, settings.memcache, workers, control, clock);
    add_memcache_stats(stats, b);
    return;
  }
  start_redis(b, settings.redis, workers, control, health, std::move(give_up));
  for (const auto* store :
       {&settings.redis.main, settings.redis.per_second ? &*settings.redis.per_second : nullptr}) {
    if (store == nullptr) continue;
    const auto& c = store->connection;
    for (const auto& secret : {c.auth_file, c.sentinel ? c.sentinel->auth_file : nullptr}) {
      if (!secret) continue;
      secret->watch(control.get_executor());
      b.secrets.push_back(secret);
    }
  }
  if (settings.redis.sync_interval.count() > 0) start_redis_sync(b, settings.redis, workers, clock, stats);
  std::vector<const redis::store*> main, per_second;
  for (const auto& w : b.redis) {
    main.push_back(w.main.get());
    if (w.per_second) per_second.push_back(w.per_second.get());
  }
  add_pool_stats(stats, std::move(main), "ratelimit.redis_pool.");
  if (!per_second.empty()) add_pool_stats(stats, std::move(per_second), "ratelimit.redis_per_second_pool.");
}

}  // namespace sluice
