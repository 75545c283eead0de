// rlqs memory: one replica (the in-process demand exchange) of 1-4 workers sharing 1-3 buckets' budgets
// (docs/guides/rlqs.md). rlqs replicas: 2-3 replicas of 1-4 workers each, sharing demand through the real
// rlqs_exchange (every second at its own phase) over a Redis in virtual time (hash_redis.hpp, round trips of
// 0.2-5 ms). Clients are Envoys, a quota stream each on a random worker of any replica, with no, steady,
// saturating and (churning epochs) bursty demand per bucket, drawn again every 1-8 minutes; they join and
// leave. The simulator plays Envoy: a bucket's first request reports it at once, then every reporting
// interval (1-10 s) a report carries every bucket it has with the interval's requests, allowed + denied (the
// true demand, so the server measures it exactly); it holds what it is sent (an assignment lives for its TTL,
// an abandon drops the bucket). The real code is driven without a connection: each worker's worker_state (its
// plan every 500 ms of virtual time), real quota_streams fed serialized reports on calls with no session, the
// in-process exchange, the demand meters and fair_share. What a stream sends is read from its buckets' `sent`
// (what add_action serializes), through to_proto, as Envoy reads it.
//
// Fair, the model (rlqs_model.hpp): a client's need is its true demand × 1.1, at least 5% of the budget split
// over the bucket's clients (docs/guides/rlqs.md#the-protocol); its fair share is min(need, L), L being the
// level at which the shares add up to the budget, or, when all needs fit, its need plus an equal part of what
// is left. The clients are those with the bucket (an abandoned bucket leaves; an idle one stays, needing its
// floor).
//
// Checked at every plan (a new client's first answer is a change):
// - the budget: once every worker has planned from the same inputs (two plan periods after a measured demand
//   or a bucket's clients last changed; with replicas, two exchange periods, two round trips and a plan
//   period more: another replica's demand is written at its round and read at ours after it), what the
//   clients hold a rule window (max_tokens + the refill of a window) adds up to at most the budget, plus one
//   request per client whose share is under 100 a window ("The bound" in docs/guides/rlqs.md#the-protocol).
//   Before that a new client's share and a rise may overlap the cuts they cause; that is by design and not
//   checked;
// - convergence: 4 reporting intervals + 2 plan periods (+ the replicas' lag) after a bucket's demands or
//   clients last changed, every client holds its fair share within 10%; 1 plan period + 2/3 of the TTL later
//   (the re-send of a rise under the push threshold), exactly, but for the rounding to whole tokens (or
//   requests per unit);
// - every assignment has the configured TTL and none a client holds has expired; a bucket is abandoned at
//   the first plan at least RLQS_BUCKET_IDLE_TIMEOUT after its last report with requests, not before.
#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <cmath>
#include <memory>
#include <optional>
#include <queue>
#include <stdexcept>

#include "hash_redis.hpp"
#include "net/grpc/call.hpp"
#include "ratelimit/backends/redis/rlqs_exchange.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/rlqs/quota_stream.hpp"
#include "ratelimit/rlqs/worker_state.hpp"
#include "rlqs.pb.h"
#include "rlqs_model.hpp"
#include "sim.hpp"
#include "stats/store.hpp"

namespace sluice::sim {

namespace rlqs_sim {

namespace rq = ratelimit::rlqs;
namespace pb = envoy::service::rate_limit_quota::v3;

constexpr std::size_t max_buckets = 3;
// rlqs_exchange's period, as the Redis backend makes it.
constexpr std::int64_t exchange_period_us = 1'000'000;

// The exchange of "fair share that ignores one client" (the simulator's, not sluice's): what worker 0
// publishes loses its first client of every bucket, so the other workers plan without it.
class ignoring_exchange final : public rq::demand_exchange {
 public:
  explicit ignoring_exchange(std::size_t workers) : real_(workers) {}
  void publish(std::size_t worker, rq::demand_map needs) override {
    if (worker == 0) {
      for (auto& [bucket, of_clients] : needs) of_clients.erase(of_clients.begin());
    }
    real_.publish(worker, std::move(needs));
  }
  void collect(const std::string& bucket, std::vector<double>& out, std::size_t except) const override {
    real_.collect(bucket, out, except);
  }

 private:
  rq::in_process_exchange real_;
};

struct client_bucket {
  std::int64_t per_interval = 0;  // the true demand: requests per reporting interval
  std::int64_t carry = 0;         // requests × µs not reported yet (÷ the interval: whole requests)
  std::int64_t accrued_to = 0;
  std::int64_t high = 0, low = 0;  // bursty: the demands it alternates between
  std::uint64_t bursts = 0;        // its toggles' token (0: not bursty)
  bool active = false;             // Envoy has the bucket: reported, not abandoned
  std::int64_t last_busy = 0;      // its last report with requests (or its first report)
  std::int64_t sent_at = 0;        // the server's last assignment, as read
  rq::assignment sent;
  holding held;
  std::int64_t expires = 0;  // when `held` does
};

struct client {
  bool alive = false;
  int worker = 0;
  std::uint64_t generation = 0;  // events of an earlier life are dropped
  std::shared_ptr<net::grpc::call> call;
  rq::quota_stream* stream = nullptr;  // the call's
  std::vector<client_bucket> buckets;
};

// What the simulator knows of a bucket.
struct bucket_state {
  std::int64_t changed = start_us;         // a client's true demand, or its clients, last changed
  std::int64_t inputs_changed = start_us;  // a measured demand, or its clients, last changed
  std::uint64_t changes = 1;
  std::uint64_t model_for = 0;  // `fair` is the model's after this many changes
  std::vector<double> fair;     // per window, by client (0: not one of its clients)
};

enum class step : std::uint8_t { plan, report, epoch, toggle, join, leave, sync, call, outage };

struct event {
  std::int64_t at;
  std::uint64_t seq;  // ties in the order scheduled
  step what;
  int who;  // the worker, the client or the replica
  int bucket;
  std::uint64_t token;  // a client's generation, or a bursty bucket's toggles
  bool operator>(const event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

class simulation {
 public:
  // `replicas`: 2-3 replicas sharing demand through Redis (rlqs_exchange), else one (in process).
  simulation(const run_params& p, bool replicas);
  run_result run();

 private:
  void schedule(std::int64_t at, step what, int who = 0, int bucket = 0, std::uint64_t token = 0) {
    queue_.push({at, ++seq_, what, who, bucket, token});
  }
  std::int64_t draw_demand(std::size_t b, bool saturating);
  void new_epoch();
  void draw_client(int c);
  void join(int c);
  void leave(int c);
  void set_demand(int c, std::size_t b, std::int64_t per_interval);
  void activate(int c, std::size_t b);
  void report(int c);
  void plan(int w);
  void read_sent(int c);
  void change(std::size_t b, bool inputs);
  const rq::stream_bucket* on_server(const client& cl, std::size_t b) const;
  const std::vector<double>& model(std::size_t b);
  void outage(bool starts);
  void check_budget(std::size_t b);
  void check_replica_budgets(std::size_t b);
  void check_convergence(std::size_t b);
  void check_held();

  run_params p_;
  random rng_;
  checker check_;
  run_result out_;
  std::int64_t now_ = start_us;
  bool calm_ = true;  // this epoch
  // The seed's settings and rules.
  rq::settings settings_;
  std::int64_t report_us_;
  std::int64_t consistent_us_;          // 2 plan periods: every worker has planned from the same inputs
  std::int64_t replica_consistent_us_;  // every worker of a replica has (2 plan periods)
  std::int64_t near_us_;                // 4 reporting intervals + 2 plan periods: every share within 10%
  std::int64_t exact_us_;               // 1 plan period + 2/3 of the TTL more: every share as fair
  std::vector<budget_shape> shapes_;
  std::vector<std::string> canonical_;  // each bucket's key, as the workers name its group
  // The real code.
  core::fake_clock clock_;
  stats::store stats_;
  boost::asio::io_context io_;  // never run: the simulator plans
  hash_redis redis_;
  std::int64_t rtt_us_ = 0;
  std::vector<std::unique_ptr<rq::demand_exchange>> exchanges_;  // a replica's
  std::vector<std::shared_ptr<rq::worker_state>> workers_;       // every replica's, in turn
  std::vector<std::size_t> replica_of_;                          // by worker
  std::int64_t outage_start_ = 0;                                // the last outage's
  std::vector<std::int64_t>
      switched_at_;  // by replica: when it went to 1/N of the budgets (0: it plans whole)
  std::map<std::uint64_t, std::function<void()>> calls_;  // Redis's answers to come (step::call)
  net::grpc::method_table methods_;
  net::grpc::call_limits limits_{.max_unsent_bytes = SIZE_MAX};  // a call with no session keeps what it sends
  // Envoy's side.
  std::vector<client> clients_;
  std::vector<bucket_state> buckets_;
  std::priority_queue<event, std::vector<event>, std::greater<>> queue_;
  std::uint64_t seq_ = 0;
  pb::RateLimitQuotaUsageReports message_;
  std::string bytes_;
};

simulation::simulation(const run_params& p, bool replicas) : p_(p), rng_(p.seed) {
  settings_.assignment_ttl = std::chrono::seconds(rng_.pick(std::vector<std::int64_t>{2, 5, 15, 15, 30}));
  settings_.bucket_idle_timeout = std::chrono::seconds(rng_.pick(std::vector<std::int64_t>{30, 60, 300}));
  if (rng_.chance(0.2)) settings_.strategy = rq::strategy::requests_per_time_unit;
  report_us_ = rng_.pick(std::vector<std::int64_t>{1, 2, 5, 5, 10}) * second;
  const std::int64_t plan_us = std::chrono::microseconds(settings_.plan_period).count();
  const std::int64_t replica_count = replicas ? rng_.between(2, 3) : 1;
  rtt_us_ = rng_.between(200, 5000);
  // Another replica's demand: published at a plan, written at its replica's next round, read at the next
  // round of ours after that (two periods and two round trips), planned from at our next plan.
  const std::int64_t shared_us = replicas ? 2 * exchange_period_us + 2 * rtt_us_ + plan_us : 0;
  consistent_us_ = 2 * plan_us + shared_us;
  replica_consistent_us_ = 2 * plan_us;
  near_us_ = 4 * report_us_ + 2 * plan_us + shared_us;
  exact_us_ = near_us_ + plan_us + std::chrono::microseconds(settings_.assignment_ttl).count() * 2 / 3;

  const std::vector<budget_shape> all{{100, "second", 1, 1}, {10, "second", 1, 1},   {6000, "minute", 60, 1},
                                      {60, "minute", 60, 1}, {300, "minute", 60, 5}, {1000, "hour", 3600, 1}};
  std::string yaml = "domain: quota\ndescriptors:\n";
  for (auto b = rng_.between(1, max_buckets); b > 0; --b) {
    const auto& sh = shapes_.emplace_back(rng_.pick(all));
    const std::string key = "b" + std::to_string(shapes_.size() - 1);
    yaml += "  - key: " + key + "\n    rate_limit: {unit: " + sh.unit +
            ", requests_per_unit: " + std::to_string(sh.requests) +
            ", unit_multiplier: " + std::to_string(sh.multiplier) + "}\n";
    pb::BucketId id;
    (*id.mutable_bucket())[key] = "x";
    canonical_.push_back(rq::bucket_key::of("quota", id).canonical);
  }
  buckets_.resize(shapes_.size());
  std::vector<ratelimit::config::config_file> files{{"quota.yaml", yaml}};
  auto rules = ratelimit::config::load_rules(files, false, stats_).rules;
  if (!rules) throw std::runtime_error("the rules do not load:\n" + yaml);

  clock_.set_micros(start_us);
  for (std::int64_t r = 0; r < replica_count; ++r) {
    const auto workers = static_cast<std::size_t>(rng_.pick(std::vector<std::int64_t>{1, 2, 2, 3, 3, 4}));
    auto& exchange = exchanges_.emplace_back();
    if (p.variant == "fair share that ignores one client") {
      exchange = std::make_unique<ignoring_exchange>(workers);
    } else if (replicas) {
      auto link = std::make_unique<hash_link>(redis_, [this](std::function<void()> f) {
        calls_.emplace(++seq_, std::move(f));
        schedule(now_ + rtt_us_, step::call, 0, 0, seq_);
      });
      exchange = std::make_unique<ratelimit::backends::redis::rlqs_exchange>(
          workers, std::move(link), "", io_.get_executor(),
          std::chrono::milliseconds(exchange_period_us / ms), clock_, "replica" + std::to_string(r));
      // Each replica's timer has a phase of its own.
      schedule(start_us + rng_.between(1, exchange_period_us / ms) * ms, step::sync, static_cast<int>(r));
    } else {
      exchange = std::make_unique<rq::in_process_exchange>(workers);
    }
    for (std::size_t w = 0; w < workers; ++w) {
      replica_of_.push_back(static_cast<std::size_t>(r));
      workers_.push_back(
          std::make_shared<rq::worker_state>(settings_, w, *exchange, clock_, stats_, io_.get_executor()));
      workers_.back()->rules = rules;
      // Each worker's timer has a phase of its own.
      schedule(start_us + rng_.between(1, plan_us / ms) * ms, step::plan,
               static_cast<int>(workers_.size() - 1));
    }
  }
  switched_at_.resize(exchanges_.size());
  // Redis outages in half the seeds: the replicas plan with 1/N of each budget.
  if (replicas && rng_.chance(0.5)) schedule(start_us + rng_.between(60, 1800) * second, step::outage, 1);
  clients_.resize(static_cast<std::size_t>(rng_.between(2, 16)));
  for (auto& c : clients_) c.buckets.resize(shapes_.size());
}

// Requests per reporting interval: steady ones around an equal part of the budget, saturating ones 1-10
// times the whole budget.
std::int64_t simulation::draw_demand(std::size_t b, bool saturating) {
  const double budget = shapes_[b].rate() * static_cast<double>(report_us_) / static_cast<double>(second);
  const double equal = budget / static_cast<double>(clients_.size());
  const double rate = saturating ? budget * static_cast<double>(rng_.between(10, 100)) / 10
                                 : equal * static_cast<double>(rng_.between(5, 200)) / 100;
  return std::max<std::int64_t>(1, std::llround(rate));
}

// A calm epoch holds the demands steady; a churning one has bursty clients, and joins and leaves on the way.
void simulation::new_epoch() {
  calm_ = rng_.chance(0.5);
  const std::int64_t length = rng_.between(60, 480) * second;
  int alive = 0;
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    if (clients_[c].alive && rng_.chance(0.15)) leave(static_cast<int>(c));
    if (!clients_[c].alive && rng_.chance(0.35)) join(static_cast<int>(c));
    alive += clients_[c].alive ? 1 : 0;
  }
  if (alive == 0) join(0);
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    if (clients_[c].alive) draw_client(static_cast<int>(c));
  }
  if (!calm_) {
    for (const step s : {step::join, step::leave}) {
      for (auto n = rng_.between(0, 3); n > 0; --n)
        schedule(now_ + rng_.between(1, length / second) * second, s,
                 static_cast<int>(rng_.between(0, static_cast<std::int64_t>(clients_.size()) - 1)));
    }
  }
  schedule(now_ + length, step::epoch);
}

// A client's demand for each bucket: none, steady, saturating, or (churning) on and off every 1-30 s.
void simulation::draw_client(int c) {
  for (std::size_t b = 0; b < shapes_.size(); ++b) {
    auto& cb = clients_[static_cast<std::size_t>(c)].buckets[b];
    const auto kind = rng_.between(0, calm_ ? 3 : 4);
    cb.bursts = 0;
    if (kind == 4) {
      cb.high = draw_demand(b, rng_.chance(0.5));
      cb.low = rng_.chance(0.5) ? 0 : draw_demand(b, false);
      cb.bursts = ++seq_;
      schedule(now_ + rng_.between(1, 30) * second, step::toggle, c, static_cast<int>(b), cb.bursts);
    }
    set_demand(c, b, kind == 0 ? 0 : kind == 4 ? cb.high : draw_demand(b, kind == 3));
  }
}

// A new Envoy: a stream on a worker; its periodic reports start within an interval.
void simulation::join(int c) {
  auto& cl = clients_[static_cast<std::size_t>(c)];
  cl.alive = true;
  ++cl.generation;
  cl.worker = static_cast<int>(rng_.between(0, static_cast<std::int64_t>(workers_.size()) - 1));
  cl.call = std::make_shared<net::grpc::call>(methods_, limits_, io_.get_executor());
  auto stream =
      std::make_shared<rq::quota_stream>(workers_[static_cast<std::size_t>(cl.worker)], cl.call.get());
  cl.stream = stream.get();
  cl.call->listen(std::move(stream));
  for (auto& cb : cl.buckets) cb = {};
  schedule(now_ + rng_.between(1, report_us_ / ms) * ms, step::report, c, 0, cl.generation);
}

// The Envoy goes away: its stream ends, and what it held with it.
void simulation::leave(int c) {
  auto& cl = clients_[static_cast<std::size_t>(c)];
  if (!cl.alive) return;
  for (std::size_t b = 0; b < shapes_.size(); ++b) {
    if (cl.buckets[b].active) change(b, true);
  }
  cl.alive = false;
  cl.stream = nullptr;
  cl.call.reset();  // the stream with it: it leaves its buckets' groups
}

void simulation::set_demand(int c, std::size_t b, std::int64_t per_interval) {
  auto& cb = clients_[static_cast<std::size_t>(c)].buckets[b];
  if (cb.per_interval == per_interval) return;
  if (cb.active) {
    cb.carry += cb.per_interval * (now_ - cb.accrued_to);
    cb.accrued_to = now_;
    change(b, false);  // the measured demand follows with the reports
  }
  cb.per_interval = per_interval;
  if (!cb.active && per_interval > 0) activate(c, b);
}

// A bucket's first request: Envoy makes the bucket and reports it at once (time_elapsed 0).
void simulation::activate(int c, std::size_t b) {
  auto& cl = clients_[static_cast<std::size_t>(c)];
  auto& cb = cl.buckets[b];
  cb.active = true;
  cb.carry = 0;
  cb.accrued_to = cb.last_busy = now_;
  change(b, true);
  message_.Clear();
  message_.set_domain("quota");
  auto& usage = *message_.add_bucket_quota_usages();
  (*usage.mutable_bucket_id()->mutable_bucket())["b" + std::to_string(b)] = "x";
  usage.set_num_requests_allowed(1);
  message_.SerializeToString(&bytes_);
  cl.stream->on_message(bytes_);
  read_sent(c);
}

// Envoy's periodic report: every bucket it has, with the interval's requests; what its token bucket let
// through was allowed, the rest denied.
void simulation::report(int c) {
  auto& cl = clients_[static_cast<std::size_t>(c)];
  message_.Clear();
  message_.set_domain("quota");
  std::array<std::optional<double>, max_buckets> measured;  // by the server, before the report
  for (std::size_t b = 0; b < shapes_.size(); ++b) {
    auto& cb = cl.buckets[b];
    if (!cb.active) continue;
    const auto* server = on_server(cl, b);
    if (!check_.expect(server != nullptr, now_ - start_us, "client ", c, ", bucket b", b,
                       ": lost by the server"))
      return;
    measured[b] = server->demand.rate();
    cb.carry += cb.per_interval * (now_ - cb.accrued_to);
    cb.accrued_to = now_;
    const std::int64_t requests = cb.carry / report_us_;
    cb.carry %= report_us_;
    if (requests > 0) cb.last_busy = now_;
    const auto admits = static_cast<std::int64_t>(cb.held.per_window * static_cast<double>(report_us_) /
                                                  static_cast<double>(shapes_[b].window_s() * second));
    auto& usage = *message_.add_bucket_quota_usages();
    (*usage.mutable_bucket_id()->mutable_bucket())["b" + std::to_string(b)] = "x";
    usage.set_num_requests_allowed(static_cast<std::uint64_t>(std::min(requests, admits)));
    usage.set_num_requests_denied(static_cast<std::uint64_t>(requests - std::min(requests, admits)));
    usage.mutable_time_elapsed()->set_seconds(report_us_ / second);
  }
  schedule(now_ + report_us_, step::report, c, 0, cl.generation);
  if (message_.bucket_quota_usages_size() == 0) return;
  message_.SerializeToString(&bytes_);
  cl.stream->on_message(bytes_);
  for (std::size_t b = 0; b < shapes_.size(); ++b) {
    if (cl.buckets[b].active && on_server(cl, b)->demand.rate() != measured[b])
      buckets_[b].inputs_changed = now_;
  }
  read_sent(c);
}

// The server's state of a client's bucket; null when it has none.
const rq::stream_bucket* simulation::on_server(const client& cl, std::size_t b) const {
  for (const auto& [group, sb] : cl.stream->buckets()) {
    if (group->key.canonical == canonical_[b]) return &sb;
  }
  return nullptr;
}

// What the server sent the client since last read (a first answer, a plan's push or re-send): each bucket's
// `sent`, as Envoy reads it from the proto.
void simulation::read_sent(int c) {
  auto& cl = clients_[static_cast<std::size_t>(c)];
  for (auto& [group, sb] : cl.stream->buckets()) {
    const auto b = static_cast<std::size_t>(
        std::find(canonical_.begin(), canonical_.end(), group->key.canonical) - canonical_.begin());
    auto& cb = cl.buckets[b];
    if (sb.sent_at_us == cb.sent_at && sb.sent.same_action(cb.sent)) continue;
    cb.sent_at = sb.sent_at_us;
    cb.sent = sb.sent;
    ++out_.decisions;
    const auto received =
        as_received(sb.sent, static_cast<std::uint32_t>(settings_.assignment_ttl.count()), shapes_[b]);
    if (!check_.expect(received.has_value(), now_ - start_us, "client ", c, ", bucket b", b,
                       ": a blanket rule for a budget"))
      return;
    cb.held = *received;
    cb.expires = now_ + cb.held.ttl_s * second;
    check_.expect(cb.held.ttl_s == settings_.assignment_ttl.count(), now_ - start_us, "client ", c,
                  ", bucket b", b, ": a time to live of ", cb.held.ttl_s, " s");
  }
}

// One plan period of a worker: what its clients are sent, and the buckets it abandons (which Envoy drops; a
// client with demand makes it again at its next request).
void simulation::plan(int w) {
  workers_[static_cast<std::size_t>(w)]->plan();
  const std::int64_t timeout = std::chrono::microseconds(settings_.bucket_idle_timeout).count();
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    auto& cl = clients_[c];
    if (!cl.alive || cl.worker != w) continue;
    read_sent(static_cast<int>(c));
    for (std::size_t b = 0; b < shapes_.size(); ++b) {
      auto& cb = cl.buckets[b];
      if (!cb.active) continue;
      const bool kept = on_server(cl, b) != nullptr;
      const std::int64_t idle = now_ - cb.last_busy;
      check_.expect(kept == (idle < timeout), now_ - start_us, "client ", static_cast<int>(c), ", bucket b",
                    b, kept ? " kept" : " abandoned", " after ", idle / ms, " ms idle (timeout ",
                    timeout / ms, " ms)");
      if (kept) continue;
      cb.active = false;
      cb.held = {};
      cb.sent_at = cb.expires = 0;
      change(b, true);
      if (cb.per_interval > 0) activate(static_cast<int>(c), b);
    }
  }
  schedule(now_ + std::chrono::microseconds(settings_.plan_period).count(), step::plan, w);
}

// `inputs`: the plans' inputs change now (a client comes or goes); a true demand only changes them as the
// server measures it.
void simulation::change(std::size_t b, bool inputs) {
  auto& st = buckets_[b];
  st.changed = now_;
  ++st.changes;
  if (inputs) st.inputs_changed = now_;
}

// The model's fair shares per window for a bucket's clients as they are now.
const std::vector<double>& simulation::model(std::size_t b) {
  auto& st = buckets_[b];
  if (st.model_for == st.changes) return st.fair;
  std::vector<double> demands;
  const double interval_s = static_cast<double>(report_us_) / static_cast<double>(second);
  for (const auto& cl : clients_) {
    if (cl.alive && cl.buckets[b].active)
      demands.push_back(static_cast<double>(cl.buckets[b].per_interval) / interval_s);
  }
  st.fair.assign(clients_.size(), 0);
  if (!demands.empty()) {
    const auto shares = fair_shares(demands, shapes_[b].rate());
    std::size_t i = 0;
    for (std::size_t c = 0; c < clients_.size(); ++c) {
      if (clients_[c].alive && clients_[c].buckets[b].active)
        st.fair[c] = shares[i++] * static_cast<double>(shapes_[b].window_s());
    }
  }
  st.model_for = st.changes;
  return st.fair;
}

// Redis goes away for 2-60 s, or comes back (the next outage 1-30 minutes later). Either way the plans'
// inputs change: each replica switches to 1/N of the budget 3 periods into an outage, and back to the fleet's
// demand once the replicas have written and read it again.
void simulation::outage(bool starts) {
  redis_.down = starts;
  if (starts) outage_start_ = now_;
  for (std::size_t b = 0; b < shapes_.size(); ++b) change(b, true);
  schedule(now_ + (starts ? rng_.between(2, 60) : rng_.between(60, 1800)) * second, step::outage,
           starts ? 0 : 1);
}

// In an outage, each replica that switched to its fraction of the budget (docs/guides/rlqs.md#the-protocol:
// 1/N, N the replicas it saw last; 3 exchange periods after its last round that was answered, or had nothing
// to share) two plan periods ago or more: its clients hold at most that fraction.
void simulation::check_replica_budgets(std::size_t b) {
  if (now_ - buckets_[b].inputs_changed <= replica_consistent_us_) return;
  std::vector<double> held(exchanges_.size());
  std::vector<int> small(exchanges_.size());
  for (const auto& cl : clients_) {
    const auto& cb = cl.buckets[b];
    if (!cl.alive || !cb.active) continue;
    const auto r = replica_of_[static_cast<std::size_t>(cl.worker)];
    held[r] += cb.held.per_window;
    small[r] += cb.held.small ? 1 : 0;
  }
  for (std::size_t r = 0; r < exchanges_.size(); ++r) {
    if (switched_at_[r] == 0 || now_ - switched_at_[r] <= replica_consistent_us_) continue;
    const double fraction = exchanges_[r]->budget_fraction();
    check_.expect(held[r] <= shapes_[b].requests * fraction + small[r] + 1e-6, now_ - start_us, "bucket b", b,
                  ": replica ", r, "'s clients hold ", held[r], " a window of ", fraction, " of a budget of ",
                  shapes_[b].requests, " (+", small[r], " for small shares), ", (now_ - outage_start_) / ms,
                  " ms into an outage");
  }
}

void simulation::check_budget(std::size_t b) {
  if (redis_.down) return check_replica_budgets(b);
  const auto& st = buckets_[b];
  if (now_ - st.inputs_changed <= consistent_us_) return;
  double held = 0;
  int small = 0;
  for (const auto& cl : clients_) {
    const auto& cb = cl.buckets[b];
    if (!cl.alive || !cb.active) continue;
    held += cb.held.per_window;
    small += cb.held.small ? 1 : 0;
  }
  check_.expect(held <= shapes_[b].requests + small + 1e-6, now_ - start_us, "bucket b", b,
                ": the clients hold ", held, " a window of a budget of ", shapes_[b].requests, " (+", small,
                " for small shares), ", (now_ - st.inputs_changed) / ms,
                " ms after the plans' inputs last changed");
}

void simulation::check_convergence(std::size_t b) {
  const std::int64_t since = now_ - buckets_[b].changed;
  if (since < near_us_ || redis_.down) return;  // (in an outage each replica shares its part among its own)
  const auto& fair = model(b);
  const double rounding = settings_.strategy == rq::strategy::token_bucket ? 1 : shapes_[b].multiplier;
  const double tolerance = since < exact_us_ ? 0.1 : 1e-6;
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    if (!clients_[c].alive || !clients_[c].buckets[b].active) continue;
    const double held = clients_[c].buckets[b].held.per_window;
    check_.expect(std::abs(held - fair[c]) <= fair[c] * tolerance + rounding, now_ - start_us, "bucket b", b,
                  ": client ", static_cast<int>(c), " holds ", held, " a window, its fair share is ", fair[c],
                  ", ", since / ms, " ms after the last change");
  }
}

void simulation::check_held() {
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    for (std::size_t b = 0; b < shapes_.size() && clients_[c].alive; ++b) {
      const auto& cb = clients_[c].buckets[b];
      if (cb.active)
        check_.expect(cb.expires > now_, now_ - start_us, "client ", static_cast<int>(c), ", bucket b", b,
                      ": its assignment expired ", (now_ - cb.expires) / ms, " ms ago");
    }
  }
}

run_result simulation::run() {
  const std::int64_t end = start_us + static_cast<std::int64_t>(p_.hours * static_cast<double>(hour));
  new_epoch();
  while (!queue_.empty() && !check_.failed()) {
    const event e = queue_.top();
    queue_.pop();
    if (e.at > end) break;
    now_ = e.at;
    clock_.set_micros(now_);
    const bool of_client =
        e.what != step::plan && e.what != step::sync && e.what != step::call && e.what != step::outage;
    auto& cl = clients_[static_cast<std::size_t>(of_client ? e.who : 0)];
    switch (e.what) {
      case step::plan:
        plan(e.who);
        check_held();
        for (std::size_t b = 0; b < shapes_.size(); ++b) {
          check_budget(b);
          check_convergence(b);
        }
        break;
      case step::report:
        if (cl.alive && e.token == cl.generation) report(e.who);
        break;
      case step::epoch:
        new_epoch();
        break;
      case step::toggle: {
        auto& cb = cl.buckets[static_cast<std::size_t>(e.bucket)];
        if (!cl.alive || e.token != cb.bursts) break;
        set_demand(e.who, static_cast<std::size_t>(e.bucket), cb.per_interval == cb.high ? cb.low : cb.high);
        schedule(now_ + rng_.between(1, 30) * second, step::toggle, e.who, e.bucket, e.token);
        break;
      }
      case step::join:
        if (cl.alive) break;
        join(e.who);
        draw_client(e.who);
        break;
      case step::leave:
        leave(e.who);
        break;
      case step::sync: {
        const auto r = static_cast<std::size_t>(e.who);
        static_cast<ratelimit::backends::redis::rlqs_exchange&>(*exchanges_[r]).sync();
        const bool whole = exchanges_[r]->budget_fraction() == 1;
        if (whole || switched_at_[r] == 0) switched_at_[r] = whole ? 0 : now_;
        schedule(now_ + exchange_period_us, step::sync, e.who);
        break;
      }
      case step::outage:
        outage(e.who == 1);
        break;
      case step::call: {
        auto f = std::move(calls_.at(e.token));
        calls_.erase(e.token);
        f();
        break;
      }
    }
  }
  return check_.finish(out_, now_);
}

}  // namespace rlqs_sim

// 1.5 virtual hours a seed: 8-13 s for the CI run's 200 seeds (2 cores, idle to busy).
leg rlqs_leg() {
  const auto run = [](const run_params& p) { return rlqs_sim::simulation(p, false).run(); };
  return {"rlqs memory", 1.5, run, {"fair share that ignores one client"}};
}

// 0.75 virtual hours a seed (2-3 replicas of 1-4 workers plan every 500 ms): 13 s for 200 seeds.
leg rlqs_replicas_leg() {
  const auto run = [](const run_params& p) { return rlqs_sim::simulation(p, true).run(); };
  return {"rlqs replicas", 0.75, run, {}};
}

}  // namespace sluice::sim
