#pragma once
// What a leg runs its workload on: several instances' workers, each a rate limit service with its own
// limiter, over one store under one virtual clock: the memory store (it decides inline: a decision is one
// call), or a real redis-server through each worker's Redis backend (redis_stores.hpp: a decision runs the
// io_context until it is answered, and every op is checked against the memory store's arithmetic). A world
// can reload its rules, read its limit tables again (LIMIT_TABLES_DIR), and restart from a
// MEMORY_SNAPSHOT_FILE. A known-wrong variant may give the limiters a skewed clock or change the store's ops.

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/limiter/leases.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/limit_tables_source.hpp"
#include "ratelimit/service/service.hpp"
#include "ratelimit/service/table_lookup.hpp"
#include "redis_stores.hpp"
#include "sim.hpp"
#include "stats/store.hpp"

namespace sluice::sim {

using rls_request = ratelimit::service::rls_request;
using rls_response = ratelimit::service::rls_response;

// A clock `skew_us` ahead of another (a known-wrong variant's limiter).
class skewed_clock final : public core::clock {
 public:
  skewed_clock(const core::clock& base, std::int64_t skew_us) : base_(base), skew_us_(skew_us) {}
  std::int64_t now_micros() const override { return base_.now_micros() + skew_us_; }

 private:
  const core::clock& base_;
  std::int64_t skew_us_;
};

// A known-wrong variant of the arithmetic, between the limiters and the store: it changes each operation
// before the store applies it (the simulator's own code: nothing of it is in sluice).
class variant_backend final : public ratelimit::limiter::backend {
 public:
  // "gcra bucket one deeper": a GCRA op's tolerance one interval longer; "holder lease one second short": a
  // holder's lease a second shorter; "newest-first release": concurrency without holder_key whose releases
  // take from the newest slices (the order in-flight limits once had), kept here with leases.hpp's arithmetic
  // under that order.
  // The newest-first leases, per key (one map for every worker's variant_backend).
  using lease_map = std::map<std::string, ratelimit::limiter::lease_slices, std::less<>>;

  variant_backend(ratelimit::limiter::backend& real, std::string variant, lease_map& leases)
      : real_(real), variant_(std::move(variant)), leases_(leases) {}
  static bool changes_ops(const std::string& variant);

  void increment(std::span<const ratelimit::limiter::counter_op> ops,
                 std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done,
                 ratelimit::limiter::batch_mode mode) override;
  void get(std::span<const ratelimit::limiter::counter_op> ops,
           std::span<ratelimit::limiter::op_result> results, ratelimit::limiter::completion& done) override;
  void inspect(std::span<const ratelimit::limiter::counter_op> ops,
               std::span<ratelimit::limiter::op_result> results,
               ratelimit::limiter::completion& done) override;
  void overwrite(std::span<const ratelimit::limiter::counter_op> ops,
                 ratelimit::limiter::completion& done) override;

 private:
  std::vector<ratelimit::limiter::counter_op> changed(
      std::span<const ratelimit::limiter::counter_op> ops) const;
  // Applies lease ops newest-first (true when it took the ops).
  bool leases_newest_first(std::span<const ratelimit::limiter::counter_op> ops,
                           std::span<ratelimit::limiter::op_result> results);
  ratelimit::limiter::backend& real_;
  std::string variant_;
  lease_map& leases_;
};

enum class store_kind : std::uint8_t { memory, redis };

inline const char* name_of(store_kind s) {
  return s == store_kind::memory ? "memory" : "redis";
}

class world {
 public:
  // `workers` services on one store, with the rules of `yaml`; `check` hears what the store kind checks
  // itself (Redis: C++ and Lua agree). `variant` (self-check): "window off by one second" gives the limiters
  // a clock a second ahead; variant_backend's change the store's ops. Throws std::runtime_error when the
  // rules do not load or Redis cannot be started.
  // `tables_dir`: LIMIT_TABLES_DIR, loaded before the rules ("" for none).
  world(const std::string& yaml, int workers, checker& check, store_kind store = store_kind::memory,
        const std::string& variant = "", const std::string& tables_dir = "");
  ~world();

  core::fake_clock clock{0};
  int workers() const { return static_cast<int>(services_.size()); }
  // Decides on worker `w` at the clock's time; throws std::runtime_error when the service refuses it.
  rls_response decide(int w, const rls_request& request);
  // Decides on a worker the seed picks.
  rls_response decide_anywhere(random& rng, const rls_request& request) {
    return decide(static_cast<int>(rng.between(0, workers() - 1)), request);
  }

  // What the store holds in a fixed window's counter (GET; on Redis, checked against the memory store too).
  std::uint64_t read_counter(const std::string& key);
  // A rules reload: every service takes the rules of `yaml` (counters stay). Throws std::runtime_error when
  // they do not load.
  void reload(const std::string& yaml);
  // LIMIT_TABLES_DIR read again, as after a change in it: changed files are swapped in. Throws
  // std::runtime_error naming a bad file.
  void reload_tables();
  // MEMORY_SNAPSHOT_FILE (memory store): writes the store's counters to `path` at the clock's time.
  void write_snapshot(const std::string& path) const;
  // A restart: a new memory store, which reads `path` back as at start, and new limiters and services (the
  // same rules). Throws std::runtime_error when the file cannot be read.
  void restart(const std::string& path);

 private:
  std::shared_ptr<const ratelimit::config::rule_set> load(const std::string& yaml);
  // `workers` services on the store, anew.
  void start_services(std::size_t workers);

  stats::store stats_;
  skewed_clock limiter_clock_;
  std::string variant_;
  std::shared_ptr<const ratelimit::config::rule_set> rules_;
  std::unique_ptr<ratelimit::backends::memory::memory_backend> store_;
  std::unique_ptr<redis_stores> redis_;                     // store_kind::redis
  std::vector<std::unique_ptr<variant_backend>> variants_;  // per worker, for a variant that changes ops
  variant_backend::lease_map variant_leases_;
  std::unique_ptr<ratelimit::service::limit_tables_source> tables_;         // with a tables_dir
  std::vector<std::unique_ptr<ratelimit::service::table_lookup>> lookups_;  // per worker, with tables_
  std::vector<std::unique_ptr<ratelimit::limiter::limiter>> limiters_;
  std::vector<std::unique_ptr<ratelimit::service::rate_limit_service>> services_;
};

// A rule's rate and how busy its clients are: `requests` per `unit` (`unit_s` seconds), and the mean gap
// between a client's requests.
struct rule_shape {
  std::uint32_t requests;
  const char* unit;
  std::int64_t unit_s;
  std::int64_t mean_gap_us;
};

// Tenants' requests of 1-3 hits (domain "sim", descriptor [tenant]): uniform gaps averaging `mean_gap_us` per
// client, and when `bursty` now and then a burst of 2-20 at once.
struct arrivals {
  std::int64_t mean_gap_us;
  int clients;
  int tenants;
  bool bursty;
};

// A seed's arrivals for `shape`: 1-4 tenants, 2-12 clients, bursty three times in ten.
arrivals draw_arrivals(random& rng, const rule_shape& shape);
// The rule file of one limit per tenant (domain "sim", key tenant) at `shape`'s rate; `options` are added to
// its rate_limit (", algorithm: gcra, ..."), `descriptor` to the descriptor ("count_only_admitted: true").
std::string tenant_rules(const rule_shape& shape, const std::string& options = "",
                         const std::string& descriptor = "");

// Decides `a`'s requests on random workers until `end_us` or the first failure, calling
// judge(now, tenant, hits, status) for each; counts them in out.decisions. The virtual time reached.
// A report of tenant `tenant` (domain "sim", descriptor [tenant]) with the descriptor's own hits_addend, so
// that 0 is a check (usage: judged as one hit); negative hits when `refund`.
rls_request tenant_report(int tenant, std::uint32_t hits, bool refund);

template <typename Judge>
std::int64_t run_arrivals(world& w, random& rng, const checker& check, const arrivals& a, std::int64_t end_us,
                          run_result& out, Judge judge);

// A request of one descriptor, its entries in order; `hits` is hits_addend (0: one).
rls_request make_request(const std::string& domain,
                         const std::vector<std::pair<std::string, std::string>>& entries,
                         std::uint32_t hits = 0, bool negative = false);

template <typename Judge>
std::int64_t run_arrivals(world& w, random& rng, const checker& check, const arrivals& a, std::int64_t end_us,
                          run_result& out, Judge judge) {
  std::int64_t now = start_us;
  while (now < end_us && !check.failed()) {
    now += rng.between(0, 2 * a.mean_gap_us / a.clients);
    w.clock.set_micros(now);
    const int burst = a.bursty && rng.chance(0.05) ? static_cast<int>(rng.between(2, 20)) : 1;
    for (int i = 0; i < burst && !check.failed(); ++i) {
      const int tenant = static_cast<int>(rng.between(0, a.tenants - 1));
      const auto hits = static_cast<std::uint32_t>(rng.chance(0.2) ? rng.between(2, 3) : 1);
      const auto request = make_request("sim", {{"tenant", "t" + std::to_string(tenant)}}, hits);
      const auto response = w.decide_anywhere(rng, request);
      ++out.decisions;
      judge(now, tenant, hits, response.statuses(0));
    }
  }
  return now;
}

}  // namespace sluice::sim
