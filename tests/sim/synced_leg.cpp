// Batched counting (REDIS_SYNC_INTERVAL) on a Redis in virtual time (virtual_redis.hpp): 1-3 instances of 1-3
// workers, each a rate limit service over the real synced_backend over the real redis_backend; every worker's
// timer tick (flush, sweep) is called at its own phase every interval (10-100 ms). Tenants of one rule each,
// limits per second or minute that are reached (a little, or by far) or never are, requests of 1-3 hits,
// bursts, and refunds (negative hits) of admitted hits through any worker; round trips of 0.2-5 ms, some
// requests slow (past the interval, past REDIS_OP_TIMEOUT), outages (refused, or hung until the timeout) in
// which requests in flight may have been applied with their replies lost, and now and then a
// REDIS_SYNC_MAX_KEYS of 1-3 counters a worker.
//
// The model is a per-window count per key: A, the hits admitted minus the hits given back (refunds only give
// back hits admitted in the same window; one counts from its arrival, as a read's answer decides its own op
// before those that waited for it, which complete first). Checked at every decision: no error (batched
// decisions go on from the local counts). At every admission by worker w at time t:
//   A ≤ L + O     (docs/concepts/batched-counting.md, "How far over the limit a window can go":
//                  L + R × (3 × interval + 2 × RTT))
// where O is the hits the other workers (of every instance) decided on the key in the window during
// (t - D, t], admitted or not, D = 3 × max(interval, RTT) + 2 × RTT (docs/concepts/batched-counting.md reads
// RTT for the interval when the round trip is longer), and RTT the longest round trip (or REDIS_OP_TIMEOUT,
// for one that fails then) of the requests sent in the last 2 × Dmax (Dmax: D at RTT = REDIS_OP_TIMEOUT).
// Unless the window meets an outage, from any request's failure (or an outage's start) to 2 × Dmax after it
// (after the outage's end): then the outage rule of docs/concepts/batched-counting.md, each worker enforcing
// L on its own traffic:
//   A - F ≤ workers × instances × L
// where F is the hits admitted by workers whose table was full (REDIS_SYNC_MAX_KEYS: decided in Redis one by
// one, or alone while it is down; the counter such a worker makes for the key once it has room starts without
// them). At the end, Redis up and every worker's unsent hits sent (then drained): nothing unsent or lost at
// the drain, and each window never refused (no view over its limit: every hit counted) holds in Redis exactly
//   A - (hits decided alone, counted in dropped_hits) + (hits that requests applied and told as failed
//   counted: sent again, they count twice; docs/concepts/batched-counting.md) + (hits that refunds told as
//   failed and never applied were to give back: not sent again, they are never given back;
//   docs/concepts/batched-counting.md) + S
// where S, the hits refund scripts were asked for and did not give back, is 0 unless a refund was decided
// while another worker held hits of the key Redis had not applied (docs/concepts/batched-counting.md: a
// refund beyond a worker's view gives back "from exactly those hits" the others flushed since). Not held to
// it: a window where a refund beyond a view (which gives back depending on the value) was lost.
#include <boost/asio/io_context.hpp>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/backends/redis/synced_backend.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "sim.hpp"
#include "virtual_redis.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace synced_sim {

namespace rr = ratelimit::backends::redis;

struct tenant_shape {
  std::uint32_t limit;
  const char* unit;
  std::int64_t unit_s;
  std::int64_t mean_gap_us;  // between two arrivals
};

// A worker's connections, its exact backend, the synced backend over them, and its service.
struct worker {
  worker(boost::asio::io_context& ioc, virtual_redis& redis, int id, const core::clock& clock,
         rr::synced_backend::options o, std::size_t instance, rr::sync_stats& sync,
         ratelimit::limiter::limiter& limiter, stats::store& stats,
         std::shared_ptr<const ratelimit::config::rule_set> rules)
      : instance(instance),
        exact_link(redis, id, false),
        flush_link(redis, id, true),
        exact(ioc.get_executor(), exact_link, nullptr),
        synced(ioc.get_executor(), exact, flush_link, nullptr, clock, o, sync, &clock),
        service(ratelimit::service::settings{}, limiter, synced, stats) {
    service.set_rules(std::move(rules));
  }
  std::size_t instance;
  virtual_link exact_link, flush_link;
  rr::redis_backend exact;
  rr::synced_backend synced;
  ratelimit::service::rate_limit_service service;
};

struct instance {
  instance(const core::clock& clock, const std::string& yaml) : sync(stats), limiter(settings(), clock) {
    std::vector<ratelimit::config::config_file> files{{"sim.yaml", yaml}};
    auto loaded = ratelimit::config::load_rules(files, false, stats);
    if (loaded.rules == nullptr)
      throw std::runtime_error("the simulation's rules do not load: " + loaded.error);
    rules = loaded.rules;
  }
  static ratelimit::limiter::settings settings() {
    ratelimit::limiter::settings s;
    s.expiration_jitter_max_seconds = 0;  // (a replay must be exact)
    return s;
  }
  stats::store stats;
  rr::sync_stats sync;
  ratelimit::limiter::limiter limiter;
  std::shared_ptr<const ratelimit::config::rule_set> rules;
  std::uint64_t dropped = 0;  // dropped_hits, as of the last decision completed here
};

// One key's window, as the model holds it.
struct window_model {
  std::int64_t start_us = 0;
  std::uint64_t limit = 0;
  std::int64_t admitted = 0;   // A: hits admitted minus hits given back
  std::int64_t refunding = 0;  // hits of refunds not decided yet
  std::uint64_t refused = 0;
  std::int64_t alone = 0;  // hits decided with no counter while Redis was down, and dropped
  // F: hits admitted by a worker whose table may have been full (REDIS_SYNC_MAX_KEYS)
  std::int64_t full = 0;
  std::int64_t twice = 0;     // hits that requests applied and told as failed counted
  std::int64_t lost = 0;      // hits that refunds told as failed and never applied were to give back
  std::int64_t short_by = 0;  // S: hits refund scripts were asked to give back and did not
  bool unsafe = false;        // a refund was decided while another worker held hits Redis had not applied
  bool inexact = false;       // a refund beyond a view was lost: not held to its count at the end
  std::vector<std::int64_t> decided, applied;  // per worker: hits counted minus given back, and in Redis
  struct hit {
    std::int64_t at;
    int worker;
    std::int64_t hits;
  };
  std::deque<hit> recent;  // decided in the last Dmax
};

// The failures' reach: spans of virtual time in which windows are held to the outage rule.
class outage_spans {
 public:
  void add(std::int64_t from, std::int64_t to) {
    if (!spans_.empty() && from <= spans_.back().second) {
      spans_.back().second = std::max(spans_.back().second, to);
    } else {
      spans_.emplace_back(from, to);
    }
  }
  bool meets(std::int64_t from, std::int64_t to) const {
    for (auto it = spans_.rbegin(); it != spans_.rend() && it->second >= from; ++it)
      if (it->first <= to) return true;
    return false;
  }

 private:
  std::vector<std::pair<std::int64_t, std::int64_t>> spans_;  // disjoint, in order
};

// The longest round trip of the requests sent in a trailing span of time.
class longest_trip {
 public:
  explicit longest_trip(std::int64_t span) : span_(span) {}
  void add(std::int64_t sent, std::int64_t rtt) {
    while (!trips_.empty() && trips_.back().second <= rtt) trips_.pop_back();
    trips_.emplace_back(sent, rtt);
  }
  std::int64_t at(std::int64_t now) {
    while (!trips_.empty() && trips_.front().first < now - span_) trips_.pop_front();
    return trips_.empty() ? 0 : trips_.front().second;
  }

 private:
  std::int64_t span_;
  std::deque<std::pair<std::int64_t, std::int64_t>> trips_;  // sent, rtt: rtts decreasing
};

class leg_run final : public redis_listener {
 public:
  explicit leg_run(const run_params& p);
  run_result run();

  void applied(int w, std::string_view key, std::int64_t delta, std::int64_t short_by) override {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    it->second->applied[static_cast<std::size_t>(w)] += delta;
    it->second->short_by += short_by;
  }
  void applied_twice(std::string_view key, std::int64_t hits) override {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    it->second->twice += hits;
  }
  void refund_lost(std::string_view key, std::int64_t hits, bool beyond) override {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    it->second->lost += hits;
    if (beyond) it->second->inexact = true;
  }
  void round_trip(std::int64_t sent, std::int64_t rtt) override { trips_.add(sent, rtt); }
  void failed() override { spans_.add(events_.now(), events_.now() + 2 * d_max_); }

 private:
  struct decision {
    rls_response response;
    int worker, tenant;
    std::uint32_t hits;
    bool refund;
    bool full;  // the worker's table may have been full (keys() at its arrival)
    window_model* window;
  };
  void arrive(int tenant);
  void decide(int w, int tenant, std::uint32_t hits, bool refund);
  void decided(std::uint64_t id, const ratelimit::service::service_error* error);
  void admitted(const decision& d, window_model& m);
  window_model& window_of(int tenant, std::int64_t window_start, std::uint64_t limit);
  void tick(std::size_t w, std::int64_t at);
  void poll() {
    ioc_.restart();
    ioc_.poll();
  }
  std::int64_t now() const { return clock_.now_micros(); }

  random rng_;
  core::fake_clock clock_{0};
  timeline events_{clock_};
  boost::asio::io_context ioc_;
  checker check_;
  run_result out_;
  std::int64_t interval_us_ = 0, d_max_ = 0, end_ = 0;
  bool arriving_ = true;  // no more arrivals after the end
  double refund_share_ = 0;
  std::size_t max_keys_ = rr::synced_backend::options{}.max_keys;
  std::vector<tenant_shape> tenants_;
  std::vector<std::vector<rls_request>> requests_;  // per tenant: 1-3 hits, then 1-3 negative hits
  std::unique_ptr<virtual_redis> redis_;
  std::deque<instance> instances_;
  std::deque<worker> workers_;
  longest_trip trips_{0};
  outage_spans spans_;
  std::map<std::pair<int, std::int64_t>, window_model> windows_;  // (tenant, window start) →
  std::unordered_map<std::string, window_model*, ratelimit::config::string_hash, std::equal_to<>> by_key_;
  std::map<std::uint64_t, decision> deciding_;
  std::uint64_t next_decision_ = 0;
};

leg_run::leg_run(const run_params& p) : rng_(p.seed) {
  clock_.set_micros(start_us);
  interval_us_ = rng_.pick(std::vector<std::int64_t>{10, 20, 50, 100}) * ms;
  redis_model model;
  model.rtt_us = rng_.pick(std::vector<std::int64_t>{200, 1000, 5000});
  model.rtt_jitter_us = model.rtt_us / 2;
  model.op_timeout_us = rng_.pick(std::vector<std::int64_t>{250 * ms, 1000 * ms});
  model.slow = rng_.pick(std::vector<double>{0, 0, 0.001, 0.01});
  if (p.variant == "flush that drops a batch") model.drop_flushes = 0.01;
  d_max_ = 3 * std::max(interval_us_, model.op_timeout_us) + 2 * model.op_timeout_us;
  trips_ = longest_trip(2 * d_max_);
  redis_ = std::make_unique<virtual_redis>(events_, rng_, model, *this);
  refund_share_ = rng_.pick(std::vector<double>{0, 0.05, 0.2});

  const std::vector<tenant_shape> shapes{
      {20, "second", 1, 25 * ms},    {100, "second", 1, 8 * ms},         {60, "minute", 60, 500 * ms},
      {300, "minute", 60, 150 * ms}, {1'000'000, "minute", 60, 40 * ms}, {1'000'000, "second", 1, 60 * ms}};
  std::string yaml = "domain: sim\ndescriptors:\n";
  const int tenants = static_cast<int>(rng_.between(1, 3));
  for (int t = 0; t < tenants; ++t) {
    tenants_.push_back(rng_.pick(shapes));
    const auto& sh = tenants_.back();
    yaml += "  - key: tenant\n    value: t" + std::to_string(t) + "\n    rate_limit: {unit: " + sh.unit +
            ", requests_per_unit: " + std::to_string(sh.limit) + "}\n";
    auto& r = requests_.emplace_back();
    for (int negative = 0; negative < 2; ++negative)
      for (std::uint32_t hits = 1; hits <= 3; ++hits)
        r.push_back(make_request("sim", {{"tenant", "t" + std::to_string(t)}}, hits, negative != 0));
  }

  rr::synced_backend::options o;
  o.interval = std::chrono::milliseconds(interval_us_ / ms);
  o.keys_per_request = rng_.chance(0.5) ? 512 : 2;
  // Now and then REDIS_SYNC_MAX_KEYS is reached: a new key's ops go to Redis one by one, and while it is down
  // they are decided alone and their hits dropped. (Without refunds: one decided alone is not applied, and
  // not counted.)
  if (rng_.chance(0.25)) {
    o.max_keys = static_cast<std::size_t>(rng_.between(1, 3));
    max_keys_ = o.max_keys;
    refund_share_ = 0;
  }
  const int count = static_cast<int>(rng_.between(1, 3));
  for (int i = 0; i < count; ++i) {
    auto& in = instances_.emplace_back(clock_, yaml);
    const int per = static_cast<int>(rng_.between(count == 1 ? 2 : 1, 3));
    for (int k = 0; k < per; ++k)
      workers_.emplace_back(ioc_, *redis_, static_cast<int>(workers_.size()), clock_, o,
                            instances_.size() - 1, in.sync, in.limiter, in.stats, in.rules);
  }

  end_ = end_of(p);
  // Outages end before the run does; what they kept is then sent.
  const int outages = static_cast<int>(rng_.pick(std::vector<std::int64_t>{0, 0, 1, 2, 3}));
  for (int i = 0; i < outages; ++i) {
    const std::int64_t length = rng_.between(100 * ms, 20 * second);
    const std::int64_t from = start_us + rng_.between(0, std::max<std::int64_t>(0, end_ - start_us - length));
    const auto kind = rng_.chance(0.5) ? virtual_redis::outage::refused : virtual_redis::outage::hung;
    events_.at(from, [this, kind, from, length] {
      if (redis_->state() != virtual_redis::outage::none) return;  // (one at a time)
      spans_.add(from, from + length + 2 * d_max_);
      redis_->start_outage(kind);
      events_.at(from + length, [this] { redis_->end_outage(); });
    });
  }
  for (std::size_t w = 0; w < workers_.size(); ++w) tick(w, start_us + rng_.between(0, interval_us_ - 1));
  for (int t = 0; t < tenants; ++t)
    events_.at(start_us + rng_.between(0, tenants_[static_cast<std::size_t>(t)].mean_gap_us),
               [this, t] { arrive(t); });
}

void leg_run::tick(std::size_t w, std::int64_t at) {
  events_.at(at, [this, w, at] {
    workers_[w].synced.tick();
    tick(w, at + interval_us_);
  });
}

void leg_run::arrive(int tenant) {
  if (!arriving_) return;
  const auto& sh = tenants_[static_cast<std::size_t>(tenant)];
  const int burst = rng_.chance(0.02) ? static_cast<int>(rng_.between(2, 20)) : 1;
  for (int i = 0; i < burst; ++i) {
    const auto hits = static_cast<std::uint32_t>(rng_.chance(0.2) ? rng_.between(2, 3) : 1);
    decide(static_cast<int>(rng_.between(0, static_cast<std::int64_t>(workers_.size()) - 1)), tenant, hits,
           false);
  }
  events_.at(now() + rng_.between(0, 2 * sh.mean_gap_us), [this, tenant] { arrive(tenant); });
}

window_model& leg_run::window_of(int tenant, std::int64_t window_start, std::uint64_t limit) {
  auto [it, added] = windows_.try_emplace({tenant, window_start});
  auto& m = it->second;
  if (added) {
    m.start_us = window_start * second;
    m.limit = limit;
    m.decided.assign(workers_.size(), 0);
    m.applied.assign(workers_.size(), 0);
    by_key_.emplace("sim_tenant_t" + std::to_string(tenant) + "_" + std::to_string(window_start), &m);
  }
  return m;
}

void leg_run::decide(int w, int tenant, std::uint32_t hits, bool refund) {
  const auto& sh = tenants_[static_cast<std::size_t>(tenant)];
  const std::int64_t seconds = now() / second;
  auto& m = window_of(tenant, seconds - seconds % sh.unit_s, sh.limit);
  if (refund) {
    // A refund gives back exactly only when every hit of the others is in Redis (see the top).
    for (std::size_t x = 0; x < workers_.size(); ++x)
      if (static_cast<int>(x) != w && m.applied[x] < m.decided[x]) m.unsafe = true;
    if (static_cast<std::int64_t>(hits) > m.admitted) m.unsafe = true;
    m.refunding += hits;
  }
  const std::uint64_t id = next_decision_++;
  auto& d = deciding_[id];
  d.worker = w;
  d.tenant = tenant;
  d.hits = hits;
  d.refund = refund;
  d.full = workers_[static_cast<std::size_t>(w)].synced.keys() >= max_keys_;
  d.window = &m;
  ++out_.decisions;
  const auto& request = requests_[static_cast<std::size_t>(tenant)][(refund ? 3 : 0) + hits - 1];
  workers_[static_cast<std::size_t>(w)].service.should_rate_limit(
      request, d.response, [this, id](const ratelimit::service::service_error* e) { decided(id, e); });
}

void leg_run::decided(std::uint64_t id, const ratelimit::service::service_error* error) {
  auto it = deciding_.find(id);
  if (!check_.expect(it != deciding_.end(), now() - start_us, "decision ", id, " completed twice")) return;
  const decision d = std::move(it->second);
  deciding_.erase(it);
  if (!check_.expect(error == nullptr, now() - start_us,
                     "a batched decision failed: ", error != nullptr ? error->message : ""))
    return;
  auto& m = *d.window;
  const auto w = static_cast<std::size_t>(d.worker);
  // Hits dropped since the instance's last decision completed are this decision's (decided alone, it
  // completes at once).
  auto& in = instances_[workers_[w].instance];
  const std::uint64_t dropped =
      in.sync.dropped_hits.value() - std::exchange(in.dropped, in.sync.dropped_hits.value());
  if (dropped != 0) {
    m.alone += static_cast<std::int64_t>(dropped);
    m.decided[w] -= static_cast<std::int64_t>(dropped);
  }
  if (d.refund) {
    m.refunding -= d.hits;
    m.admitted -= d.hits;
    m.decided[w] -= d.hits;
    return;
  }
  m.recent.push_back({now(), d.worker, d.hits});
  if (d.response.statuses(0).code() != rls_response::OK) {
    // (Counted until the worker's view is over: not known here, and such windows are not summed.)
    ++m.refused;
    m.decided[w] += d.hits;
    return;
  }
  m.admitted += d.hits;
  m.decided[w] += d.hits;
  if (d.full) m.full += d.hits;
  admitted(d, m);
  // Now and then the request gives its hits (or some) back, through any worker, within its window.
  if (refund_share_ > 0 && rng_.chance(refund_share_)) {
    const auto& sh = tenants_[static_cast<std::size_t>(d.tenant)];
    const std::int64_t at = now() + (rng_.chance(0.3) ? 0 : rng_.between(0, 2 * second));
    const auto hits = static_cast<std::uint32_t>(rng_.between(1, d.hits));
    const int via = static_cast<int>(rng_.between(0, static_cast<std::int64_t>(workers_.size()) - 1));
    if (at / second / sh.unit_s == now() / second / sh.unit_s)
      events_.at(at, [this, via, tenant = d.tenant, hits] {
        if (arriving_) decide(via, tenant, hits, true);
      });
  }
}

// A refund may be decided before an admission that completes first (a read's answer decides its own op,
// then those that waited for it, whose decisions complete first): it counts from its arrival here.
void leg_run::admitted(const decision& d, window_model& m) {
  const std::int64_t t = now();
  const std::int64_t a = m.admitted - m.refunding;
  while (!m.recent.empty() && m.recent.front().at <= t - d_max_) m.recent.pop_front();
  if (spans_.meets(m.start_us, t)) {
    const std::uint64_t fleet = workers_.size() * m.limit;
    check_.expect(a - m.full <= static_cast<std::int64_t>(fleet), t - start_us, "tenant t", d.tenant, ": ",
                  a - m.full, " hits admitted (and ", m.full,
                  " with the table full) in a window that met an outage, over workers × limit = ", fleet);
    return;
  }
  const std::int64_t rtt = trips_.at(t);
  const std::int64_t reach = 3 * std::max(interval_us_, rtt) + 2 * rtt;
  std::int64_t others = 0;
  for (const auto& h : m.recent)
    if (h.at > t - reach && h.worker != d.worker) others += h.hits;
  check_.expect(a <= static_cast<std::int64_t>(m.limit) + others, t - start_us, "tenant t", d.tenant, ": ", a,
                " hits admitted in the window, over L + R × D = ", m.limit, " + ", others,
                " (the other workers' hits in the last D = ", reach / ms, " ms; RTT ", rtt, " us) on worker ",
                d.worker);
}

run_result leg_run::run() {
  auto go = [&](std::int64_t until) {
    while (!check_.failed() && events_.step(until)) poll();
  };
  go(end_);
  // The end: no more arrivals, Redis up and quick; everything kept is sent.
  arriving_ = false;
  redis_->set_slow(0);
  go(end_ + 2 * d_max_ + 5 * second);
  int drained = 0;
  for (auto& w : workers_) w.synced.drain([&drained] { ++drained; });
  poll();
  go(end_ + 4 * d_max_ + 10 * second);
  const std::int64_t t = now() - start_us;
  check_.expect(deciding_.empty(), t, deciding_.size(), " decisions never completed");
  check_.expect(drained == static_cast<int>(workers_.size()), t, drained, " of ", workers_.size(),
                " workers drained");
  for (std::size_t w = 0; w < workers_.size(); ++w)
    check_.expect(workers_[w].synced.unsent_hits() == 0, t, "worker ", w, " holds ",
                  workers_[w].synced.unsent_hits(), " hits unsent with Redis up");
  for (auto& in : instances_)
    check_.expect(in.sync.lost_at_stop.load() == 0, t, in.sync.lost_at_stop.load(),
                  " hits lost at the drain");
  for (const auto& [at, m] : windows_) {
    if (m.refused != 0 || m.inexact) continue;
    const std::string key = "sim_tenant_t" + std::to_string(at.first) + "_" + std::to_string(at.second);
    const std::int64_t in_redis = redis_->value(key);
    const std::int64_t excused = m.unsafe ? m.short_by : 0;
    check_.expect(in_redis == m.admitted - m.alone + m.twice + m.lost + excused, t, key, " holds ", in_redis,
                  " where the model has ", m.admitted, " admitted (hits minus refunds) - ", m.alone,
                  " dropped + ", m.twice, " applied twice + ", m.lost, " of refunds lost + ", excused,
                  " not given back by refunds racing others' flushes");
  }
  return check_.finish(out_, std::min(now(), end_));
}

run_result run(const run_params& p) {
  leg_run r(p);
  return r.run();
}

}  // namespace synced_sim

leg synced_leg() {
  return {"fixed_window synced", 0.05, synced_sim::run, {"flush that drops a batch"}};
}

}  // namespace sluice::sim
