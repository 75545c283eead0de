#pragma once
// A Redis in virtual time, for the batched-counting leg (synced_leg.cpp): redis::stores (links: one per
// worker and use, as a worker's connections) to one server that runs the counter commands on a map. A request
// is applied halfway through its round trip and answered at its end, in order on its link; now and then one
// is slow (up to 80 round trips); one without a reply within REDIS_OP_TIMEOUT fails then (and may still be
// applied later, as Redis runs what it received). Outages: "refused" breaks the connections (the requests in
// flight fail at once, new ones are refused), "hung" stops answering (requests fail at their timeout); either
// way what Redis had not applied it never applies. The leg is told what each request changed, what every
// round trip took, each failure, and each request that was applied but told as failed (its hits are sent
// again). The variant "flush that drops a batch" acknowledges some flushes as if applied, without applying
// them: the simulator's own fault, not sluice's.

#include <algorithm>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "../support/resp_commands.hpp"
#include "core/clock.hpp"
#include "ratelimit/backends/redis/counter_commands.hpp"
#include "redis/error.hpp"
#include "redis/store.hpp"
#include "sim.hpp"

namespace sluice::sim::synced_sim {

// Events in virtual time, run in the order of their time, then of their scheduling.
class timeline {
 public:
  explicit timeline(core::fake_clock& clock) : clock_(clock) {}
  std::int64_t now() const { return clock_.now_micros(); }
  void at(std::int64_t t, std::function<void()> f) {
    queue_.push({std::max(t, now()), next_++, std::move(f)});
  }
  // Runs the next event due by `until`, the clock moved to its time; false when there is none.
  bool step(std::int64_t until) {
    if (queue_.empty() || queue_.top().at > until) return false;
    auto f = std::move(queue_.top().f);
    clock_.set_micros(queue_.top().at);
    queue_.pop();
    f();
    return true;
  }

 private:
  struct event {
    std::int64_t at;
    std::uint64_t seq;
    mutable std::function<void()> f;
    bool operator>(const event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  core::fake_clock& clock_;
  std::priority_queue<event, std::vector<event>, std::greater<>> queue_;
  std::uint64_t next_ = 0;
};

// What the server tells the leg.
class redis_listener {
 public:
  virtual ~redis_listener() = default;
  // A request of `worker`'s changed `key` by `delta` (INCRBY, or what a refund script gave back); a refund
  // script gave back `short_by` hits less than it was asked to.
  virtual void applied(int worker, std::string_view key, std::int64_t delta, std::int64_t short_by) = 0;
  // A request applied and told as failed added `hits` to `key`: sent again, they apply twice (what it gave
  // back is not sent again).
  virtual void applied_twice(std::string_view key, std::int64_t hits) = 0;
  // A request told as failed and never applied asked to give back `hits` of `key`, which are not sent again
  // (hits it counted are). `beyond`: a refund beyond a view (unseen_refund_script), which gives back
  // depending on the value.
  virtual void refund_lost(std::string_view key, std::int64_t hits, bool beyond) = 0;
  // A request sent at `sent` will be answered `rtt` later, or fail then (REDIS_OP_TIMEOUT).
  virtual void round_trip(std::int64_t sent, std::int64_t rtt) = 0;
  // A request failed now.
  virtual void failed() = 0;
};

struct redis_model {
  std::int64_t rtt_us = 1000;
  std::int64_t rtt_jitter_us = 500;
  std::int64_t op_timeout_us = 250'000;
  double slow = 0;          // the share of requests 5 to 80 times slower
  double drop_flushes = 0;  // the variant: the share of flushes acknowledged and not applied
};

class virtual_redis;

// One connection of a worker's: requests on it are applied and answered in the order sent.
class virtual_link final : public redis::store {
 public:
  virtual_link(virtual_redis& server, int worker, bool flushes)
      : server_(server), worker_(worker), flushes_(flushes) {}
  void start(observer) override {}
  void stop() override {}
  void exec(std::shared_ptr<redis::pending_request> request, std::string_view key) override;
  bool one_key_per_request() const override { return false; }
  bool up() const override;
  std::string describe(boost::system::error_code ec) const override { return ec.message(); }
  std::string last_error() const override { return {}; }
  redis::connection_stats stats() const override { return {}; }

  int worker() const { return worker_; }
  bool flushes() const { return flushes_; }
  std::int64_t last_apply = 0, last_reply = 0;

 private:
  virtual_redis& server_;
  int worker_;
  bool flushes_;  // the synced backend's flushes (and their PINGs), not the exact backend's requests
};

class virtual_redis {
 public:
  enum class outage : std::uint8_t { none, refused, hung };

  virtual_redis(timeline& events, random& rng, redis_model model, redis_listener& listener)
      : events_(events), rng_(rng), model_(model), listener_(listener) {}

  std::int64_t value(std::string_view key) const {
    auto it = data_.find(key);
    return it == data_.end() ? 0 : it->second;
  }
  outage state() const { return outage_; }
  void set_slow(double share) { model_.slow = share; }

  void send(virtual_link& link, std::shared_ptr<redis::pending_request> request) {
    const std::int64_t now = events_.now();
    if (outage_ == outage::refused) {
      listener_.failed();
      if (request->done) request->done(redis::make_error_code(redis::error::not_connected), {});
      return;
    }
    const std::uint64_t id = next_id_++;
    auto& q = flight_[id];
    q.link = &link;
    q.request = std::move(request);
    q.commands = test::commands_of(q.request->payload);
    std::int64_t rtt = model_.rtt_us + rng_.between(0, model_.rtt_jitter_us);
    if (model_.slow > 0 && rng_.chance(model_.slow)) rtt *= rng_.between(5, 80);
    const std::int64_t apply = std::max(now + rtt / 2, link.last_apply);
    q.reply_at = std::max(now + rtt, link.last_reply);
    q.deadline = now + model_.op_timeout_us;
    link.last_apply = apply;
    link.last_reply = q.reply_at;
    if (outage_ == outage::hung) {
      q.never = q.cut = true;
    } else {
      listener_.round_trip(now, std::min(q.reply_at, q.deadline) - now);
    }
    events_.at(apply, [this, id] { apply_one(id); });
    events_.at(std::min(q.reply_at, q.deadline), [this, id] { finish(id); });
  }

  void start_outage(outage kind) {
    outage_ = kind;
    for (auto it = flight_.begin(); it != flight_.end();) {
      auto& q = it->second;
      if (!q.apply_passed) q.never = true;
      q.cut = true;
      if (kind == outage::refused) q.link->last_apply = q.link->last_reply = 0;  // (a new connection)
      if (kind == outage::refused && !q.done) {
        fail(q, redis::error::connection_lost);
        if (q.apply_passed) {
          it = flight_.erase(it);
          continue;
        }
      }
      ++it;
    }
  }
  void end_outage() { outage_ = outage::none; }

 private:
  using command_list = test::command_list;
  struct change {
    std::string key;
    std::int64_t delta;
    std::int64_t short_by;  // a refund script's: asked minus given back
    bool refund;            // a refund script's
  };
  struct in_flight {
    virtual_link* link = nullptr;
    std::shared_ptr<redis::pending_request> request;
    command_list commands;
    std::vector<redis::value> replies;
    std::vector<change> changes;  // what it applied
    std::int64_t reply_at = 0, deadline = 0;
    bool apply_passed = false;  // its apply time has come
    bool applied = false;
    bool never = false;  // not received by Redis: never applied
    bool cut = false;    // its reply cannot come
    bool done = false;   // answered, or failed
  };

  void apply_one(std::uint64_t id) {
    auto it = flight_.find(id);
    auto& q = it->second;
    q.apply_passed = true;
    if (!q.never && outage_ == outage::none) {
      const bool drop = model_.drop_flushes > 0 && q.link->flushes() && has_incrby(q.commands) &&
                        rng_.chance(model_.drop_flushes);
      q.replies = run(q.commands, drop ? nullptr : &q.changes);
      for (const auto& c : q.changes) listener_.applied(q.link->worker(), c.key, c.delta, c.short_by);
      q.applied = true;
      if (q.done) told_failed(q);  // it timed out first
    } else if (q.done) {
      refunds_lost(q);  // it timed out first, and never applies
    }
    if (q.done) flight_.erase(it);
  }

  void finish(std::uint64_t id) {
    auto it = flight_.find(id);
    if (it == flight_.end()) return;  // failed when its connection broke, and applied
    auto& q = it->second;
    if (q.done) return;
    const std::int64_t now = events_.now();
    if (q.applied && !q.cut && now >= q.reply_at) {
      q.done = true;
      if (q.request->done) q.request->done({}, std::move(q.replies));
    } else if (now < q.deadline) {
      events_.at(q.deadline, [this, id] { finish(id); });  // no reply will come: its timeout tells
      return;
    } else {
      fail(q, redis::error::request_timeout);
    }
    if (q.apply_passed) flight_.erase(it);
  }

  void fail(in_flight& q, redis::error e) {
    q.done = true;
    listener_.failed();
    if (q.applied) {
      told_failed(q);
    } else if (q.apply_passed) {
      refunds_lost(q);  // (otherwise apply_one tells whether it applies late)
    }
    if (q.request->done) q.request->done(redis::make_error_code(e), {});
  }

  // The request was applied and its sender told it failed: the hits it counted will be sent again.
  void told_failed(const in_flight& q) {
    for (const auto& c : q.changes)
      if (!c.refund) listener_.applied_twice(c.key, c.delta);
  }
  // The request was told failed and never applied: what it asked to give back is not sent again.
  void refunds_lost(const in_flight& q) {
    for (const auto& c : q.commands) {
      if (c[0] != "EVAL" || c.size() < 5) continue;
      listener_.refund_lost(c[3], test::to_int(c[4]),
                            c[1] == ratelimit::backends::redis::unseen_refund_script);
    }
  }

  static bool has_incrby(const command_list& cs) {
    return std::ranges::any_of(cs, [](const auto& c) { return c[0] == "INCRBY"; });
  }

  // Runs the commands as Redis and the scripts of counter_commands.hpp do, and lists what they changed; with
  // no list, on a copy (the variant's dropped flush).
  std::vector<redis::value> run(const command_list& cs, std::vector<change>* changes) {
    const bool commit = changes != nullptr;
    std::map<std::string, std::int64_t, std::less<>> written;
    auto get = [&](const std::string& key) -> std::optional<std::int64_t> {
      if (auto w = written.find(key); w != written.end()) return w->second;
      if (auto d = data_.find(key); d != data_.end()) return d->second;
      return std::nullopt;
    };
    std::vector<redis::value> replies;
    for (const auto& c : cs) {
      if (c[0] == "INCRBY") {
        const std::int64_t v = get(c[1]).value_or(0) + test::to_int(c[2]);
        written[c[1]] = v;
        if (commit) changes->push_back({c[1], test::to_int(c[2]), 0, false});
        replies.push_back(test::integer(v));
      } else if (c[0] == "EXPIRE") {
        replies.push_back(
            test::integer(get(c[1]) ? 1 : 0));  // (keys are kept: the leg reads them at the end)
      } else if (c[0] == "PING") {
        redis::value pong;
        pong.type = redis::value::kind::simple_string;
        pong.text = "PONG";
        replies.push_back(std::move(pong));
      } else if (c[0] == "EVAL" && c.size() >= 5 &&
                 (c[1] == ratelimit::backends::redis::refund_script ||
                  (c[1] == ratelimit::backends::redis::unseen_refund_script && c.size() == 6))) {
        const auto v = get(c[3]);
        const std::int64_t above = !v || *v < 0 ? 0 : c.size() == 6 ? *v - test::to_int(c[5]) : *v;
        const std::int64_t give = std::max<std::int64_t>(0, std::min(above, test::to_int(c[4])));
        if (commit) changes->push_back({c[3], -give, test::to_int(c[4]) - give, true});
        if (!v || *v < 0) {
          replies.push_back(test::integer(0));
          continue;
        }
        written[c[3]] = *v - give;
        replies.push_back(test::integer(*v - give));
      } else {
        redis::value e;
        e.type = redis::value::kind::error;
        e.text = "ERR the simulator does not run " + c[0];
        replies.push_back(std::move(e));
      }
    }
    if (commit)
      for (auto& [key, v] : written) data_[key] = v;
    return replies;
  }

  timeline& events_;
  random& rng_;
  redis_model model_;
  redis_listener& listener_;
  std::map<std::string, std::int64_t, std::less<>> data_;
  std::map<std::uint64_t, in_flight> flight_;
  std::uint64_t next_id_ = 0;
  outage outage_ = outage::none;
};

inline void virtual_link::exec(std::shared_ptr<redis::pending_request> request, std::string_view) {
  server_.send(*this, std::move(request));
}

inline bool virtual_link::up() const {
  return server_.state() == virtual_redis::outage::none;
}

}  // namespace sluice::sim::synced_sim
