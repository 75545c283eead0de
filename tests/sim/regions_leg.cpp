// Several regions (issue 52, docs/guides/regions.md) in virtual time: 2-4 regions, each with
// - a primary: what its instance writes (counters, its heartbeat);
// - a replica of every other region's primary: each write applied a replication lag later (5-300 ms, in
//   order); a cut link applies nothing and says master_link_status:down until it heals, then catches up;
// - one Sluice instance: the real regional_backend over a counter store on its primary, and the real
//   region_reader over stores that answer from its primary and its replicas, half a round trip each way.
// The workload: a fixed window of L on a few tenants, each region sending at its own rate, in bursts and
// pauses, some tenants only in some regions, and regions that start mid-window. Half the seeds use
// REDIS_REMOTE_FALLBACK=share and cut links, symmetric (both ways between two regions) or one-sided.
// Half the seeds set REDIS_REMOTE_COLD_INTERVAL (2-8 intervals): a key far from its limit is read less often
// (checked: fewer reads than keys × rounds), and S below grows by that interval.
// Invariants, at every decision:
//   - freshness: once a region has read a key (two intervals and a round trip after it first used it), what
//     its view adds lies between the other regions' true counts S ago and now, S = interval + round trip +
//     the longest replication lag (+ the cold interval) (links up for S + REDIS_REMOTE_MAX_LAG);
//   - the bound: after an admission, the window's true count is at most L + what the other regions counted
//     in the last S (all of what they counted, before this region's first read of the key);
//   - share: every region knows of a partition (its sharing gauge) within D of its start (detection()); in a
//     window that began after that and ended before the partition healed, the regions admit at most L
//     together.
// Variants the invariants must catch: "no remote totals" (each region counts alone), "share ignored"
// (partitions with REDIS_REMOTE_FALLBACK=last).

#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "../support/resp_commands.hpp"
#include "core/clock.hpp"
#include "core/strings.hpp"
#include "ratelimit/backends/redis/region_reader.hpp"
#include "ratelimit/backends/redis/regional_backend.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "redis/error.hpp"
#include "sim.hpp"
#include "stats/store.hpp"

namespace sluice::sim {

namespace {

namespace rr = ratelimit::backends::redis;
namespace lim = ratelimit::limiter;

constexpr std::int64_t window_s = 60;
constexpr std::uint64_t limit = 120;

// A Redis's keys: counters and hashes.
struct keyspace {
  std::map<std::string, std::int64_t, std::less<>> counters;
  std::map<std::string, std::map<std::string, std::string>, std::less<>> hashes;
};

// One write to a primary, as replication carries it.
struct write {
  std::string key, field, value;
  std::int64_t add = 0;  // INCRBY (else HSET field value)
};

void apply(keyspace& k, const write& w) {
  if (w.field.empty()) {
    k.counters[w.key] += w.add;
  } else {
    k.hashes[w.key][w.field] = w.value;
  }
}

redis::value bulk(std::string text) {
  redis::value v;
  v.type = redis::value::kind::bulk_string;
  v.text = std::move(text);
  return v;
}

class simulation;

// A Redis connection of one instance: to its own primary or to one of its replicas.
class region_store final : public redis::store {
 public:
  region_store(simulation& sim, int region, int of) : sim_(sim), region_(region), of_(of) {}
  void start(observer) override {}
  void stop() override {}
  void exec(std::shared_ptr<redis::pending_request> request, std::string_view) override;
  bool one_key_per_request() const override { return false; }
  bool up() const override { return true; }
  std::string describe(boost::system::error_code ec) const override { return ec.message(); }
  std::string last_error() const override { return {}; }
  redis::connection_stats stats() const override { return {}; }

 private:
  simulation& sim_;
  int region_;  // whose instance
  int of_;      // whose primary this is, or a replica of (== region_: the primary itself)
};

// This region's counters, on its primary (INCRBY at once: the local round trip plays no part in the bound).
class primary_counters final : public lim::backend {
 public:
  primary_counters(simulation& sim, int region) : sim_(sim), region_(region) {}
  void increment(std::span<const lim::counter_op> ops, std::span<lim::op_result> results,
                 lim::completion& done, lim::batch_mode) override;
  void get(std::span<const lim::counter_op>, std::span<lim::op_result>, lim::completion& done) override {
    done.complete(nullptr);
  }
  void inspect(std::span<const lim::counter_op>, std::span<lim::op_result>, lim::completion& done) override {
    done.complete(nullptr);
  }
  void overwrite(std::span<const lim::counter_op>, lim::completion& done) override { done.complete(nullptr); }

 private:
  simulation& sim_;
  int region_;
};

struct inline_completion final : lim::completion {
  bool failed = false;
  void complete(const lim::backend_error* e) noexcept override { failed = e != nullptr; }
};

// Region x's replica of region y's primary.
struct link {
  keyspace data;
  bool up = true;
  std::deque<std::pair<std::int64_t, write>> pending;  // (when it applies, the write), in order
  std::int64_t last_due = 0;
  std::int64_t up_since = 0;
};

struct region {
  keyspace primary;
  std::unique_ptr<primary_counters> counters;
  std::unique_ptr<rr::regional_backend> regional;
  std::unique_ptr<stats::store> stats;
  std::unique_ptr<rr::region_reader> reader;
  std::int64_t starts_at = 0;  // its traffic begins then
  std::vector<double> rates;   // per tenant: requests per second (0: none here)
};

class simulation {
 public:
  simulation(const run_params& p)
      : rng_(p.seed), end_(end_of(p)), variant_(p.variant), clock_(start_us / second) {
    n_ = static_cast<int>(rng_.between(2, 4));
    tenants_ = static_cast<int>(rng_.between(1, 3));
    share_ = variant_ == "share ignored" || rng_.chance(0.5);
    partitions_ = share_;
    interval_ = rng_.between(5, 25) * 10 * ms;
    rtt_ = rng_.between(1, interval_ / ms / 2) * ms;
    lag_min_ = rng_.between(1, 50) * ms;
    lag_max_ = lag_min_ + rng_.between(0, 250) * ms;
    max_lag_ = 1000 * ms;
    cold_ = rng_.chance(0.5) ? rng_.between(2, 8) * interval_ : 0;
    staleness_ = interval_ + rtt_ + lag_max_ + cold_;
    links_.resize(static_cast<std::size_t>(n_ * n_));
    regions_.resize(static_cast<std::size_t>(n_));
    for (int x = 0; x < n_; ++x) build(x);
  }

  run_result run() {
    for (int x = 0; x < n_; ++x) {
      auto& r = regions_[static_cast<std::size_t>(x)];
      at(start_us + rng_.between(1, interval_ / ms) * ms, [this, x] { round(x); });
      for (int t = 0; t < tenants_; ++t)
        if (r.rates[static_cast<std::size_t>(t)] > 0) at(r.starts_at, [this, x, t] { arrive(x, t); });
    }
    if (partitions_) at(start_us + rng_.between(30, 300) * second, [this] { partition(); });
    while (!events_.empty() && !check_.failed()) {
      auto e = events_.top();
      events_.pop();
      if (e.when > end_) break;
      now_ = e.when;
      clock_.set_micros(now_);
      e.run();
    }
    for (auto& r : regions_) r.reader->stop();
    // Keys far from their limit (every window's start) waited for a later round.
    if (cold_ > 0 && keys_tracked_ > 0)
      check_.expect(keys_read_ < keys_tracked_, now_, "REDIS_REMOTE_COLD_INTERVAL ", cold_ / ms,
                    " ms: every key was read every round (", keys_read_, " reads of ", keys_tracked_, ")");
    return check_.finish({decisions_, 0, 0, {}}, now_);
  }

  // region_store's work: the request's commands run on `region`'s view of `of` half a round trip from now,
  // and their replies come back half a round trip later.
  void serve(int region, int of, std::shared_ptr<redis::pending_request> request) {
    at(now_ + rtt_ / 2, [this, region, of, request] {
      auto replies = run_commands(region, of, test::commands_of(request->payload));
      at(now_ + rtt_ / 2, [request, replies = std::move(replies)]() mutable {
        if (request->done) request->done({}, std::move(replies));
      });
    });
  }

  // primary_counters' work: INCRBY on `region`'s primary, replicated.
  std::int64_t count(int region, const std::string& key, std::int64_t add) {
    write w{key, {}, {}, add};
    write_primary(region, w);
    return regions_[static_cast<std::size_t>(region)].primary.counters[key];
  }

 private:
  struct event {
    std::int64_t when;
    std::uint64_t seq;
    std::function<void()> run;
    bool operator<(const event& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };
  void at(std::int64_t when, std::function<void()> f) { events_.push({when, seq_++, std::move(f)}); }
  link& link_of(int here, int there) { return links_[static_cast<std::size_t>(here * n_ + there)]; }
  static std::string name(int x) { return core::cat("r", x); }

  void build(int x) {
    auto& r = regions_[static_cast<std::size_t>(x)];
    rr::region_settings s;
    s.region = name(x);
    s.sync_interval = std::chrono::milliseconds(interval_ / ms);
    s.max_lag = std::chrono::milliseconds(max_lag_ / ms);
    s.cold_interval = std::chrono::milliseconds(cold_ / ms);
    s.fallback =
        share_ && variant_ != "share ignored" ? rr::remote_fallback::share : rr::remote_fallback::last;
    std::vector<std::unique_ptr<redis::store>> remotes;
    for (int y = 0; y < n_; ++y) {
      if (y == x) continue;
      s.remotes.push_back({name(y), {}});
      remotes.push_back(std::make_unique<region_store>(*this, x, y));
    }
    r.counters = std::make_unique<primary_counters>(*this, x);
    r.regional = std::make_unique<rr::regional_backend>(*r.counters, false, cold_ > 0);
    r.stats = std::make_unique<stats::store>();
    rr::region_reader::workers_link workers;
    workers.count = 1;
    workers.collect = [&r](rr::region_reader::deliver_fn deliver) { deliver(r.regional->take_new_keys()); };
    workers.publish = [&r](rr::remote_view_ptr view) { r.regional->set_view(std::move(view)); };
    r.reader = std::make_unique<rr::region_reader>(s, std::make_unique<region_store>(*this, x, x),
                                                   std::move(remotes), io_.get_executor(), clock_, *r.stats,
                                                   std::move(workers));
    r.starts_at = start_us + (rng_.chance(0.3) ? rng_.between(1, 2 * window_s) * second : 0);
    for (int t = 0; t < tenants_; ++t)
      r.rates.push_back(rng_.chance(0.2) ? 0.0 : static_cast<double>(rng_.between(1, 40)) / 10.0);
  }

  void write_primary(int x, const write& w) {
    apply(regions_[static_cast<std::size_t>(x)].primary, w);
    for (int here = 0; here < n_; ++here) {
      if (here == x) continue;
      auto& l = link_of(here, x);
      const std::int64_t due = std::max(now_ + rng_.between(lag_min_, lag_max_), l.last_due);
      l.last_due = due;
      l.pending.emplace_back(due, w);
      if (l.up) at(due, [this, here, x] { deliver(here, x); });
    }
  }

  void deliver(int here, int there) {
    auto& l = link_of(here, there);
    while (l.up && !l.pending.empty() && l.pending.front().first <= now_) {
      apply(l.data, l.pending.front().second);
      l.pending.pop_front();
    }
  }

  std::vector<redis::value> run_commands(int region, int of, const test::command_list& commands) {
    const bool own = region == of;
    auto& data = own ? regions_[static_cast<std::size_t>(of)].primary : link_of(region, of).data;
    std::vector<redis::value> replies;
    for (const auto& c : commands) {
      if (c[0] == "HSET" && own) {
        write_primary(region, {c[1], c[2], c[3], 0});
        replies.push_back(test::integer(1));
      } else if (c[0] == "PEXPIRE") {
        replies.push_back(test::integer(1));
      } else if (c[0] == "INFO") {
        replies.push_back(bulk(own ? "role:master\r\n"
                                   : core::cat("role:slave\r\nmaster_link_status:",
                                               link_of(region, of).up ? "up" : "down", "\r\n")));
      } else if (c[0] == "HGETALL") {
        redis::value all;
        all.type = redis::value::kind::array;
        if (auto it = data.hashes.find(c[1]); it != data.hashes.end()) {
          for (const auto& [field, value] : it->second) {
            all.elements.push_back(bulk(field));
            all.elements.push_back(bulk(value));
          }
        }
        replies.push_back(std::move(all));
      } else if (c[0] == "MGET") {
        redis::value values;
        values.type = redis::value::kind::array;
        for (std::size_t i = 1; i < c.size(); ++i) {
          auto it = data.counters.find(c[i]);
          values.elements.push_back(it == data.counters.end() ? redis::value{}
                                                              : bulk(std::to_string(it->second)));
        }
        replies.push_back(std::move(values));
      } else {
        throw std::runtime_error("the simulated region's Redis does not run " + c[0]);
      }
    }
    return replies;
  }

  void round(int x) {
    auto& r = regions_[static_cast<std::size_t>(x)];
    r.stats->for_each_gauge([&](const std::string& n, const stats::gauge& g) {
      if (n == "ratelimit.redis_region.keys") keys_tracked_ += static_cast<std::uint64_t>(g.value());
      if (n == "ratelimit.redis_region.keys_read") keys_read_ += static_cast<std::uint64_t>(g.value());
    });
    r.reader->round();
    at(now_ + interval_, [this, x] { round(x); });
  }

  bool sharing(int x) const {
    bool on = false;
    regions_[static_cast<std::size_t>(x)].stats->for_each_gauge(
        [&](const std::string& n, const stats::gauge& g) {
          if (n == "ratelimit.redis_region.sharing") on = g.value() == 1;
        });
    return on;
  }

  // Every region knows of a partition within D of its start: the side that cannot read sees its replica's
  // link down at its next round (an interval and a round trip); the others read that in its next heartbeat
  // (an interval, the longest replication lag, then their next round and its round trip).
  std::int64_t detection() const { return 3 * interval_ + 2 * rtt_ + lag_max_ + ms; }

  void check_known() {
    for (int x = 0; x < n_; ++x)
      check_.expect(sharing(x), now_, "share: region ", x, " does not know of the partition ",
                    detection() / ms, " ms after it began");
  }

  // Links cut for 30 s to 5 minutes (both ways between two regions, or one way), then healed; the next 1-10
  // minutes on.
  void partition() {
    const int a = static_cast<int>(rng_.between(0, n_ - 1));
    int b = static_cast<int>(rng_.between(0, n_ - 2));
    if (b >= a) ++b;
    cut_links_ = {{a, b}};
    if (rng_.chance(0.5)) cut_links_.push_back({b, a});  // symmetric
    for (auto [here, there] : cut_links_) link_of(here, there).up = false;
    cut_ = true;
    known_by_ = now_ + detection();
    at(known_by_, [this] { check_known(); });
    at(now_ + rng_.between(30, 300) * second, [this] { heal(); });
  }

  void heal() {
    for (const auto& cut : cut_links_) {
      const int here = cut.first, there = cut.second;  // (clang 14 captures no structured binding)
      auto& l = link_of(here, there);
      l.up = true;
      l.up_since = now_;
      for (auto& [due, w] : l.pending) due = std::max(due, now_ + lag_min_);
      if (!l.pending.empty()) at(l.pending.back().first, [this, here, there] { deliver(here, there); });
    }
    cut_ = false;
    healed_at_ = now_;
    at(now_ + rng_.between(60, 600) * second, [this] { partition(); });
  }

  // The reference model: per key, each region's hits (times) in the current window.
  struct key_model {
    std::vector<std::vector<std::int64_t>> hits;  // per region, when each hit was counted
    std::vector<std::int64_t> first_use;          // per region (0: not yet)
    std::uint64_t admitted = 0;
    std::int64_t window_start = 0;
  };
  std::uint64_t counted(const key_model& m, int r, std::int64_t before) const {
    const auto& h = m.hits[static_cast<std::size_t>(r)];
    return static_cast<std::uint64_t>(std::upper_bound(h.begin(), h.end(), before) - h.begin());
  }

  void arrive(int x, int t) {
    auto& r = regions_[static_cast<std::size_t>(x)];
    decide(x, t);
    // Bursts (a tenth of the time, 10× the rate) and pauses (a tenth, none).
    double rate = r.rates[static_cast<std::size_t>(t)];
    if (rng_.chance(0.1)) rate *= 10;
    const std::int64_t mean_us = static_cast<std::int64_t>(1e6 / rate);
    std::int64_t next = now_ + rng_.between(1, 2 * mean_us);
    if (rng_.chance(0.001)) next += rng_.between(10, 120) * second;
    at(next, [this, x, t] { arrive(x, t); });
  }

  void decide(int x, int t) {
    const std::int64_t ws = now_ / second / window_s * window_s;
    const std::string key = core::cat("t", t, "_", ws);
    auto& m = models_[t];
    if (m.window_start != ws) {
      // The window before: with every region sharing all through it, the regions admitted at most L.
      if (m.window_start != 0 && known_by_ != 0 && m.window_start * second >= known_by_ &&
          (cut_ || healed_at_ >= (m.window_start + window_s) * second))
        check_.expect(m.admitted <= limit, now_, "share: window ", m.window_start, " admitted ", m.admitted,
                      " of ", limit, " while every region knew of the partition");
      m = key_model{};
      m.window_start = ws;
      m.hits.resize(static_cast<std::size_t>(n_));
      m.first_use.assign(static_cast<std::size_t>(n_), 0);
    }
    auto& r = regions_[static_cast<std::size_t>(x)];
    lim::counter_op op;
    op.key = key;
    op.increment = 1;
    op.now_us = now_;
    op.algorithm = lim::fixed_window_op{limit, ws + window_s};
    lim::op_result result;
    inline_completion done;
    const std::uint64_t seen = r.regional->remote_total(op);
    if (variant_ == "no remote totals") {
      r.counters->increment(std::span(&op, 1), std::span(&result, 1), done, lim::batch_mode::independent);
    } else {
      r.regional->increment(std::span(&op, 1), std::span(&result, 1), done, lim::batch_mode::independent);
    }
    ++decisions_;
    auto& first = m.first_use[static_cast<std::size_t>(x)];
    if (first == 0) first = now_;
    m.hits[static_cast<std::size_t>(x)].push_back(now_);
    const bool admitted = lim::admits(op, result);
    if (admitted) ++m.admitted;
    if (partitions_ && (cut_ || now_ - healed_at_ < staleness_ + 2 * max_lag_)) return;
    // Freshness: what the view adds, against the other regions' true counts.
    const bool read = now_ - first >= 2 * interval_ + rtt_;
    std::uint64_t now_count = 0, then_count = 0;
    for (int y = 0; y < n_; ++y) {
      if (y == x) continue;
      now_count += counted(m, y, now_);
      then_count += counted(m, y, now_ - staleness_);
    }
    check_.expect(seen <= now_count, now_, "region ", x, " key ", key, ": its view adds ", seen,
                  ", more than the others counted (", now_count, ")");
    if (read)
      check_.expect(seen >= then_count, now_, "region ", x, " key ", key, ": its view adds ", seen,
                    ", less than the ", then_count, " the others had counted ", staleness_ / ms, " ms ago");
    // The bound.
    if (admitted) {
      std::uint64_t total = 0;
      for (int y = 0; y < n_; ++y) total += counted(m, y, now_);
      const std::uint64_t unseen = read ? now_count - then_count : now_count;
      check_.expect(total <= limit + unseen, now_, "region ", x, " admitted with ", total,
                    " counted in window ", ws, " (limit ", limit, ", unseen by it ", unseen, ")");
    }
  }

  random rng_;
  std::int64_t end_;
  std::string variant_;
  core::fake_clock clock_;
  boost::asio::io_context io_;  // the readers' timers (never started: rounds are events here)
  int n_ = 2, tenants_ = 1;
  bool share_ = false, partitions_ = false;
  std::int64_t interval_ = 0, rtt_ = 0, lag_min_ = 0, lag_max_ = 0, max_lag_ = 0, cold_ = 0, staleness_ = 0;
  std::vector<link> links_;
  std::vector<region> regions_;
  std::map<int, key_model> models_;
  std::priority_queue<event> events_;
  std::uint64_t seq_ = 0;
  std::int64_t now_ = start_us;
  std::uint64_t decisions_ = 0;
  std::uint64_t keys_tracked_ = 0,
                keys_read_ = 0;  // summed over rounds (REDIS_REMOTE_COLD_INTERVAL's effect)
  checker check_;
  // Partitions.
  bool cut_ = false;
  std::vector<std::pair<int, int>> cut_links_;
  std::int64_t known_by_ = 0;  // when every region must know of the partition (0: none yet)
  std::int64_t healed_at_ = 0;
};

void region_store::exec(std::shared_ptr<redis::pending_request> request, std::string_view) {
  sim_.serve(region_, of_, std::move(request));
}

void primary_counters::increment(std::span<const lim::counter_op> ops, std::span<lim::op_result> results,
                                 lim::completion& done, lim::batch_mode) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto add = static_cast<std::int64_t>(ops[i].increment) * (ops[i].refund ? -1 : 1);
    results[i].value = static_cast<std::uint64_t>(sim_.count(region_, std::string(ops[i].key), add));
  }
  done.complete(nullptr);
}

run_result run_regions(const run_params& p) {
  return simulation(p).run();
}

}  // namespace

leg regions_leg() {
  return {"regions redis", 0.5, run_regions, {"no remote totals", "share ignored"}};
}

}  // namespace sluice::sim
