#include "ratelimit/backends/redis/module.hpp"

#include <algorithm>
#include <atomic>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/backends/redis/rlqs_exchange.hpp"
#include "redis/cluster.hpp"
#include "redis/pool.hpp"

namespace sluice::ratelimit::backends::redis {

namespace asio = boost::asio;

namespace {

// One Redis store (a pool, or a cluster client) on `ioc`, with `size` connections.
std::unique_ptr<sluice::redis::store> make_store(const redis_store_settings& s, asio::io_context& ioc,
                                                 std::size_t size) {
  if (!s.cluster_seeds.empty())
    return std::make_unique<sluice::redis::cluster>(ioc.get_executor(), s.connection, s.cluster_seeds, size);
  return std::make_unique<sluice::redis::pool>(ioc.get_executor(), s.connection, size);
}

// upstream's pool stats, summed over the workers: gauge <prefix>cx_active, counters <prefix>cx_total and
// <prefix>cx_local_close.
void add_pool_stats(stats::store& stats, std::vector<const sluice::redis::store*> stores,
                    const std::string& prefix) {
  struct last_counts {
    std::uint64_t opened = 0, closed_locally = 0;
  };
  auto& active = stats.get_gauge(prefix + "cx_active");
  auto& opened = stats.get_counter(prefix + "cx_total");
  auto& closed = stats.get_counter(prefix + "cx_local_close");
  stats.add_generator(
      [stores = std::move(stores), &active, &opened, &closed, last = last_counts{}]() mutable {
        sluice::redis::connection_stats now;
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

}  // namespace

redis_module::redis_module(const redis_settings& settings, const start_context& context)
    : module(context.workers.size()),
      settings_(settings),
      control_(context.control),
      clock_(context.clock),
      workers_(context.workers),
      startup_timer_(context.control) {
  start_stores(context);
  watch_secrets(context.control);
  if (settings_.sync_interval.count() > 0) start_sync(context);
  if (settings_.regions) start_regions(context);
  std::vector<const sluice::redis::store*> main, per_second;
  for (const auto& w : workers_) {
    main.push_back(w.main.get());
    if (w.per_second) per_second.push_back(w.per_second.get());
  }
  add_pool_stats(context.stats, std::move(main), "ratelimit.redis_pool.");
  if (!per_second.empty())
    add_pool_stats(context.stats, std::move(per_second), "ratelimit.redis_per_second_pool.");
}

void redis_module::start_stores(const start_context& context) {
  const unsigned workers = worker_count_;
  workers_.build([&](worker& w, unsigned i, asio::io_context& io) {
    w.io = &io;
    w.main = make_store(settings_.main, io, share_of(settings_.main.pool_size, i, workers));
    if (settings_.per_second)
      w.per_second =
          make_store(*settings_.per_second, io, share_of(settings_.per_second->pool_size, i, workers));
    w.backend = std::make_unique<redis_backend>(io.get_executor(), *w.main, w.per_second.get());
    if (settings_.limit_tables) w.tables = std::make_unique<redis_table_reader>(*w.main);
  });
  // Healthy once every store has been reached; with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION, only while each has
  // a live connection.
  auto component = context.health.add_component("redis", false);
  auto update = [this, &health = context.health, component,
                 follow = settings_.health_check_active_connection] {
    bool is_up = up();
    if (is_up || follow) health.set(component, is_up);
    // Each worker reconnects on its own backoff: once one is through, the others need not wait theirs out.
    if (!is_up) retry_down_stores();
  };
  core::log_info("connecting to redis on ", settings_.main.connection.address, " with pool size ",
                 settings_.main.pool_size, " shared by ", workers, " workers");
  for (auto& w : workers_) {
    w.main->start(update);
    if (w.per_second) w.per_second->start(update);
  }
  if (settings_.startup_max_elapsed.count() > 0) {
    startup_timer_.expires_after(settings_.startup_max_elapsed);
    startup_timer_.async_wait([this, give_up = context.give_up](const boost::system::error_code& ec) {
      if (ec || up()) return;
      core::log_error("timed out waiting for Redis connection to ", settings_.main.connection.address,
                      " after ", settings_.startup_max_elapsed.count(),
                      "ms: ", workers_[0].main->last_error());
      give_up();
    });
  }
}

void redis_module::watch_secrets(asio::io_context& control) {
  for (const auto* store : {&settings_.main, settings_.per_second ? &*settings_.per_second : nullptr}) {
    if (store == nullptr) continue;
    const auto& c = store->connection;
    for (const auto& secret : {c.auth_file, c.sentinel ? c.sentinel->auth_file : nullptr}) {
      if (!secret) continue;
      secret->watch(control.get_executor());
      secrets_.push_back(secret);
    }
  }
}

// REDIS_SYNC_INTERVAL: each worker decides from its own view of the counters and sends its hits in batches.
void redis_module::start_sync(const start_context& context) {
  sync_stats_ = std::make_unique<sync_stats>(context.stats);
  static const core::steady_clock steady;
  const synced_backend::options options{settings_.sync_interval,
                                        std::max<std::size_t>(1, settings_.sync_max_keys / worker_count_)};
  for (auto& w : workers_) {
    w.synced = std::make_unique<synced_backend>(w.io->get_executor(), *w.backend, *w.main, w.per_second.get(),
                                                context.clock, options, *sync_stats_, &steady);
    w.synced->start();
  }
  auto& unsent = context.stats.get_gauge("ratelimit.redis_sync.pending_hits");
  auto& keys = context.stats.get_gauge("ratelimit.redis_sync.keys");
  context.stats.add_generator([this, &unsent, &keys] {
    std::int64_t hits = 0, held = 0;
    for (const auto& w : workers_) {
      hits += w.synced->unsent_hits();
      held += static_cast<std::int64_t>(w.synced->keys());
    }
    unsent.set(hits);
    keys.set(held);
  });
  core::log_info("REDIS_SYNC_INTERVAL=", settings_.sync_interval.count(),
                 "ms: counters are decided locally and their hits sent to Redis in batches");
}

// REDIS_REGION: each worker's backend adds the other regions' totals, which one reader on the control thread
// reads for every worker.
void redis_module::start_regions(const start_context& context) {
  const auto& regions = *settings_.regions;
  // Without remote regions this instance only writes its heartbeat: its decisions are as without regions.
  const bool remote = !regions.remotes.empty();
  if (remote) {
    for (auto& w : workers_) {
      limiter::backend& inner = w.synced ? static_cast<limiter::backend&>(*w.synced) : *w.backend;
      w.regional = std::make_unique<regional_backend>(inner, settings_.per_second.has_value(),
                                                      regions.cold_interval.count() > 0);
    }
  }
  std::vector<std::unique_ptr<sluice::redis::store>> remotes;
  for (const auto& r : regions.remotes) {
    auto connection = r.connection;
    // A read older than REDIS_REMOTE_MAX_LAG is of no use; a remote replica may be slower than the local
    // Redis.
    connection.request_timeout = std::max(connection.request_timeout, regions.max_lag);
    remotes.push_back(std::make_unique<sluice::redis::pool>(control_.get_executor(), connection, 1));
    if (connection.auth_file) {
      connection.auth_file->watch(control_.get_executor());
      secrets_.push_back(connection.auth_file);
    }
  }
  region_reader::workers_link link;
  link.count = remote ? worker_count_ : 0;
  link.collect = [this](region_reader::deliver_fn deliver) {
    workers_.post_each([this, deliver](worker& w) {
      asio::post(control_,
                 [deliver, keys = w.regional->take_new_keys()]() mutable { deliver(std::move(keys)); });
    });
  };
  link.publish = [this, remote](remote_view_ptr view) {
    if (remote) workers_.post_each([view](worker& w) { w.regional->set_view(view); });
  };
  regions_ =
      std::make_unique<region_reader>(regions, make_store(settings_.main, control_, 1), std::move(remotes),
                                      control_.get_executor(), clock_, context.stats, std::move(link));
  regions_->start();
}

limiter::backend& redis_module::backend(unsigned worker) {
  auto& w = workers_[worker];
  if (w.regional) return *w.regional;
  if (w.synced) return *w.synced;
  return *w.backend;
}

bool redis_module::up() const {
  for (const auto& w : workers_) {
    if (!w.main->up() || (w.per_second && !w.per_second->up())) return false;
  }
  return !workers_.empty();
}

void redis_module::retry_down_stores() {
  std::vector<sluice::redis::store*> down;
  bool any_up = false;
  for (auto& w : workers_) {
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

// One connection of its own, on the control thread: a few commands per bucket per second.
std::unique_ptr<rlqs::demand_exchange> redis_module::demand_exchange(const std::string& key_prefix) {
  return std::make_unique<rlqs_exchange>(worker_count_, make_store(settings_.main, control_, 1), key_prefix,
                                         control_.get_executor(), std::chrono::seconds(1), clock_);
}

void redis_module::drain(std::function<void()> then) {
  if (!sync_stats_) return then();
  // The last worker to be drained posts `then`.
  auto left = std::make_shared<std::atomic<std::size_t>>(workers_.size());
  auto last = [left, &control = control_, lost = &sync_stats_->lost_at_stop, then = std::move(then)] {
    if (left->fetch_sub(1) != 1) return;
    if (const auto hits = lost->load(); hits != 0) {
      core::log_error("stopping with ", hits, hits == 1 ? " hit" : " hits",
                      " that Redis has not acknowledged: they are lost");
    }
    asio::post(control, then);
  };
  workers_.post_each([last](worker& w) { w.synced->drain(last); });
}

void redis_module::stop() {
  startup_timer_.cancel();
  if (regions_) regions_->stop();
  for (auto& w : workers_) {
    if (w.synced) w.synced->stop();
    w.main->stop();
    if (w.per_second) w.per_second->stop();
  }
  for (auto& secret : secrets_) secret->stop();
}

}  // namespace sluice::ratelimit::backends::redis
