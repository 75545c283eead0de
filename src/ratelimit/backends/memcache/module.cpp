#include "ratelimit/backends/memcache/module.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"
#include "memcache/srv_lookup.hpp"

namespace sluice::ratelimit::backends::memcache {

namespace asio = boost::asio;

namespace {

// The nodes at start: MEMCACHE_HOST_PORT, or what MEMCACHE_SRV names now (upstream panics when it cannot).
std::vector<std::string> initial_servers(const memcache_settings& s) {
  if (s.srv.empty()) return s.host_port;
  auto found = sluice::memcache::lookup_srv(s.srv, s.srv_dns_server);
  if (!found) throw core::settings_error(core::cat("Unable to fetch servers from SRV: ", found.error()));
  return *found;
}

}  // namespace

memcache_module::memcache_module(const memcache_settings& settings, const start_context& context)
    : module(context.workers.size()),
      settings_(settings),
      workers_(context.workers),
      srv_timer_(context.control) {
  sluice::memcache::client_config config;
  config.servers = initial_servers(settings_);
  config.connection.skip_hostname_verification = settings_.tls.skip_hostname_verification;
  const unsigned workers = worker_count_;
  core::log_info("connecting to memcached on ", core::join(config.servers, ","), " with ",
                 settings_.max_idle_conns, " connections per node shared by ", workers, " workers");
  workers_.build([&](worker& w, unsigned i, asio::io_context& io) {
    auto c = config;
    c.connections_per_node = share_of(settings_.max_idle_conns, i, workers);
    // One TLS context per worker: a context's certificate store is not shared between threads (as each Redis
    // connection has its own).
    c.connection.tls = core::make_tls_client_context(
        settings_.tls, {"MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_CLIENT_CERT", "MEMCACHE_TLS_CLIENT_KEY"});
    w.client = std::make_unique<sluice::memcache::client>(io.get_executor(), std::move(c));
    w.backend = std::make_unique<memcache_backend>(*w.client, context.clock);
    w.client->start();
  });
  if (!settings_.srv.empty() && settings_.srv_refresh.count() > 0)
    asio::co_spawn(context.control, srv_refresh_loop(config.servers), asio::detached);
  add_stats(context.stats);
}

// MEMCACHE_SRV_REFRESH: looks the record up again on the control thread; a new list goes to every worker's
// client, a failed lookup keeps the last list.
asio::awaitable<void> memcache_module::srv_refresh_loop(std::vector<std::string> current) {
  for (;;) {
    srv_timer_.expires_after(settings_.srv_refresh);
    auto [ec] = co_await srv_timer_.async_wait(core::use_tuple);
    if (ec || stopped_) co_return;
    auto found = sluice::memcache::lookup_srv(settings_.srv, settings_.srv_dns_server);
    if (!found) {
      core::log_error("Unable to refresh memcached servers from SRV, keeping the last ", current.size(), ": ",
                      found.error());
      continue;
    }
    if (*found == current) continue;
    current = *found;
    core::log_warn("memcached servers from SRV ", settings_.srv, ": ", core::join(current, ","));
    workers_.post_each([list = current](worker& w) { w.client->set_servers(list); });
  }
}

// upstream's ratelimit.memcache.* counters, summed over the workers.
void memcache_module::add_stats(stats::store& stats) {
  struct stat {
    std::atomic<std::uint64_t> memcache_counts::*field;
    stats::counter* counter;
    std::uint64_t last = 0;
  };
  std::vector<stat> list;
  for (auto [field, name] :
       std::initializer_list<std::pair<std::atomic<std::uint64_t> memcache_counts::*, const char*>>{
           {&memcache_counts::multiget_success, "multiget.__code=success"},
           {&memcache_counts::multiget_error, "multiget.__code=error"},
           {&memcache_counts::increment_success, "increment.__code=success"},
           {&memcache_counts::increment_miss, "increment.__code=miss"},
           {&memcache_counts::increment_error, "increment.__code=error"},
           {&memcache_counts::add_success, "add.__code=success"},
           {&memcache_counts::add_error, "add.__code=error"},
           {&memcache_counts::add_not_stored, "add.__code=not_stored"},
           {&memcache_counts::keys_requested, "keys_requested"},
           {&memcache_counts::keys_found, "keys_found"}}) {
    list.push_back({field, &stats.get_counter(std::string("ratelimit.memcache.") + name)});
  }
  stats.add_generator([this, list = std::move(list)]() mutable {
    for (auto& s : list) {
      std::uint64_t now = 0;
      for (const auto& w : workers_) now += (w.backend->counts().*s.field).load(std::memory_order_relaxed);
      if (now > s.last) s.counter->add(now - s.last);
      s.last = now;
    }
  });
}

std::unique_ptr<rlqs::demand_exchange> memcache_module::demand_exchange(const std::string& key_prefix) {
  core::log_info("RLQS: with BACKEND_TYPE=memcache each replica shares budgets among its own clients only");
  return module::demand_exchange(key_prefix);
}

void memcache_module::stop() {
  stopped_ = true;
  srv_timer_.cancel();
  for (auto& w : workers_) w.client->stop();
}

}  // namespace sluice::ratelimit::backends::memcache
