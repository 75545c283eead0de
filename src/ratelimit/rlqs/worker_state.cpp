#include "ratelimit/rlqs/worker_state.hpp"

#include <algorithm>
#include <cmath>

#include "ratelimit/rlqs/fair_share.hpp"
#include "ratelimit/rlqs/quota_stream.hpp"

namespace sluice::ratelimit::rlqs {

namespace rlqs_pb = envoy::service::rate_limit_quota::v3;

service_stats service_stats::make(stats::store& store) {
  return {&store.get_gauge("ratelimit.rlqs.active_streams"),
          &store.get_gauge("ratelimit.rlqs.active_buckets"), &store.get_counter("ratelimit.rlqs.reports")};
}

worker_state::worker_state(const settings& s, std::size_t w, demand_exchange& e, const core::clock& c,
                           stats::store& st, boost::asio::any_io_executor ex)
    : config(s), worker(w), exchange(e), clock(c), store(st), stats(service_stats::make(st)), timer(ex) {}

const std::shared_ptr<bucket_group>& worker_state::group_for(std::string_view domain,
                                                             const rlqs_pb::BucketId& id) {
  bucket_key::canonical_of(domain, id, scratch_key);
  auto it = groups.find(std::string_view(scratch_key));
  if (it != groups.end()) return it->second;
  auto g = std::make_shared<bucket_group>();
  g->key = bucket_key::of(domain, id);
  g->rule = match_policy(rules.get(), domain, g->key);
  g->stats = rule_quota_stats::make(store, g->rule.rule);
  g->id = id;
  return groups.emplace(g->key.canonical, g).first->second;
}

void worker_state::rematch() {
  for (auto& [key, g] : groups) {
    auto updated = match_policy(rules.get(), g->key.domain, g->key);
    if (updated.rule != g->rule.rule) {
      if (g->stats.assigned != nullptr) g->stats.assigned->add(-g->assigned_published);
      g->assigned_published = 0;
      g->stats = rule_quota_stats::make(store, updated.rule);
    }
    g->rule = std::move(updated);
  }
}

double worker_state::demand_of(const stream_bucket& b) const {
  if (auto r = b.demand.rate()) return *r;
  // Not measured yet (one report so far): as if it wanted the whole budget, so it gets a fair share at once.
  return b.group->rule.budget.rate();
}

void worker_state::fleet_demands(const bucket_group& g, std::vector<double>& out) const {
  exchange.collect(g.key.canonical, out, worker);
  for (const auto* m : g.members) out.push_back(demand_of(*m));
}

group_plan worker_state::plan_for(const bucket_group& g, const std::vector<double>& fleet) const {
  group_plan p;
  if (g.rule.what != policy::kind::shared) return p;
  p.budget_rate = g.rule.budget.rate() * exchange.budget_fraction();
  std::vector<double> needs;
  needs_of(fleet, p.budget_rate, needs);
  p.shares = plan_shares(needs, p.budget_rate);
  p.floor = p.budget_rate * demand_floor_share / static_cast<double>(std::max<std::size_t>(1, fleet.size()));
  return p;
}

assignment worker_state::assign(const stream_bucket& b, const group_plan& p) const {
  const auto& rule = b.group->rule;
  if (rule.what != policy::kind::shared) {
    assignment a;
    a.what = rule.what == policy::kind::deny_all ? assignment::kind::deny_all : assignment::kind::allow_all;
    return a;
  }
  const double need = std::max(demand_of(b) * demand_headroom, p.floor);
  return size_assignment(p.shares.share_for(need), rule.budget, config.strategy);
}

void worker_state::plan() {
  const std::int64_t now = clock.now_micros();
  abandon_idle(now);
  publish_demand();
  plans.clear();
  for (auto it = groups.begin(); it != groups.end();) {
    auto& g = *it->second;
    if (g.members.empty()) {
      if (g.stats.assigned != nullptr) g.stats.assigned->add(-g.assigned_published);
      it = groups.erase(it);
      continue;
    }
    std::vector<double> fleet;
    if (g.rule.what == policy::kind::shared) fleet_demands(g, fleet);
    plans.emplace(&g, plan_for(g, fleet));
    ++it;
  }
  // Stream by stream, in one reused message: a plan that moves every share holds one stream's answer at a
  // time, not every stream's.
  for (auto* stream : streams) push_changes(*stream, now);
  for (auto& [key, g] : groups) publish_assigned(*g);
  update_gauges();
}

void worker_state::abandon_idle(std::int64_t now) {
  const std::int64_t timeout =
      std::chrono::duration_cast<std::chrono::microseconds>(config.bucket_idle_timeout).count();
  for (auto* stream : streams) {
    std::vector<const bucket_group*> idle;
    for (const auto& [group, b] : stream->buckets()) {
      if (now - std::max(b.demand.last_busy_us(), b.joined_us) >= timeout) idle.push_back(group);
    }
    if (idle.empty()) continue;
    scratch_response.Clear();
    for (const auto* group : idle) {
      auto& action = *scratch_response.add_bucket_action();
      *action.mutable_bucket_id() = group->id;
      action.mutable_abandon_action();
      stream->drop(group);
    }
    if (stream->open()) stream->send(scratch_response);
  }
}

void worker_state::publish_demand() {
  demand_map mine;
  for (const auto& [key, g] : groups) {
    if (g->members.empty() || g->rule.what != policy::kind::shared) continue;
    auto& demands = mine[key];
    for (const auto* m : g->members) demands.push_back(demand_of(*m));
  }
  exchange.publish(worker, std::move(mine));
}

void worker_state::push_changes(quota_stream& stream, std::int64_t now) {
  const auto ttl = static_cast<std::uint32_t>(config.assignment_ttl.count());
  scratch_response.Clear();
  for (auto& [group, b] : stream.buckets()) {
    const auto a = assign(b, plans.at(group));
    // A share that rose by less than the threshold waits for the re-send before its time to live ends: a
    // changed token bucket starts again from max_tokens, so small gains are not worth a push of their own.
    if (!share_moved(b, a) && !resend_due(b, now)) continue;
    b.sent = a;
    b.sent_at_us = now;
    add_action(scratch_response, *group, b.sent, ttl);
  }
  if (scratch_response.bucket_action_size() > 0 && stream.open()) stream.send(scratch_response);
}

// The group's part of its rule's rlqs_assigned gauge: what its clients hold, per rule window.
void worker_state::publish_assigned(bucket_group& g) {
  if (g.stats.assigned == nullptr) return;
  double assigned = 0;
  for (const auto* m : g.members) assigned += m->sent.rate;
  const auto per_window =
      static_cast<std::int64_t>(std::llround(assigned * static_cast<double>(g.rule.budget.window_seconds)));
  g.stats.assigned->add(per_window - g.assigned_published);
  g.assigned_published = per_window;
}

// Any decrease goes out (what clients hold must stay within the budget), of the refill or of the burst (a
// share that falls by under a token may keep its refill but lose a token of burst); an increase only past the
// threshold (a changed token bucket starts again from max_tokens, so small gains are not worth a push).
bool worker_state::share_moved(const stream_bucket& b, const assignment& a) {
  if (b.sent_at_us == 0 || b.sent.what != a.what) return true;
  if (a.rate < b.sent.rate || a.max_tokens < b.sent.max_tokens) return true;
  return a.rate - b.sent.rate > push_threshold * b.sent.rate;
}

bool worker_state::resend_due(const stream_bucket& b, std::int64_t now) const {
  const double ttl_us = static_cast<double>(config.assignment_ttl.count()) * 1e6;
  return static_cast<double>(now - b.sent_at_us) >= ttl_us * resend_after_ttl_fraction;
}

void worker_state::update_gauges() {
  std::int64_t buckets = 0;
  for (auto* s : streams) buckets += static_cast<std::int64_t>(s->buckets().size());
  const auto n = static_cast<std::int64_t>(streams.size());
  stats.active_streams->add(n - streams_published);
  stats.active_buckets->add(buckets - buckets_published);
  streams_published = n;
  buckets_published = buckets;
}

void worker_state::schedule(const std::shared_ptr<worker_state>& self) {
  if (stopped) return;
  timer.expires_after(config.plan_period);
  timer.async_wait([weak = std::weak_ptr<worker_state>(self)](boost::system::error_code ec) {
    auto s = weak.lock();
    if (ec || !s || s->stopped) return;
    s->plan();
    s->schedule(s);
  });
}

}  // namespace sluice::ratelimit::rlqs
