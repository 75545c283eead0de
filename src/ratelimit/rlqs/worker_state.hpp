#pragma once
// The state of the quota service on one worker, shared by its streams (which may outlive the service object
// by a little at shutdown): the bucket groups, the open streams, the planning timer.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/rlqs/bucket_group.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"
#include "ratelimit/rlqs/demand_meter.hpp"
#include "ratelimit/rlqs/fair_share.hpp"
#include "ratelimit/rlqs/quota_service.hpp"
#include "ratelimit/rlqs/settings.hpp"

namespace sluice::ratelimit::rlqs {

// A shared bucket's plan: its fair shares of the budget this process plans with, and the floor of a need.
struct group_plan {
  share_plan shares;
  double budget_rate = 0;
  double floor = 0;
};

// One client's view of one bucket.
// One per (stream, bucket): kept small, a client may report thousands of buckets (about 130 bytes).
struct stream_bucket {
  bucket_group* group = nullptr;  // alive while it has members (worker_state::plan erases empty groups only)
  demand_meter demand;
  assignment sent;
  std::int64_t sent_at_us = 0;  // 0: nothing sent yet
  std::int64_t joined_us = 0;
  std::uint32_t member_index = 0;  // its place in group->members
};

// A client joins or leaves a bucket group in constant time (many streams may leave at once, at a GOAWAY).
inline void join(bucket_group& g, stream_bucket& b) {
  b.group = &g;
  b.member_index = static_cast<std::uint32_t>(g.members.size());
  g.members.push_back(&b);
}
inline void leave(stream_bucket& b) {
  auto& members = b.group->members;
  stream_bucket* last = members.back();
  members[b.member_index] = last;
  last->member_index = b.member_index;
  members.pop_back();
}

struct worker_state {
  worker_state(const settings& s, std::size_t worker, demand_exchange& exchange, const core::clock& clock,
               stats::store& store, boost::asio::any_io_executor ex);

  const settings& config;
  std::size_t worker;
  demand_exchange& exchange;
  const core::clock& clock;
  stats::store& store;
  service_stats stats;
  tracing::tracer* tracer = nullptr;
  boost::asio::steady_timer timer;
  bool stopped = false;
  std::shared_ptr<const config::rule_set> rules;
  std::unordered_map<std::string, std::shared_ptr<bucket_group>, config::string_hash, std::equal_to<>>
      groups;               // by canonical key
  std::string scratch_key;  // group_for's lookups
  // Reused for every answer (cleared, its parts kept): no allocation per action once warm.
  envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse scratch_response;
  std::unordered_map<const bucket_group*, group_plan> plans;  // this plan period's, by group
  std::vector<quota_stream*> streams;
  std::unordered_map<const void*, std::size_t> streams_per_connection;
  std::int64_t streams_published = 0;  // this worker's part of the gauges
  std::int64_t buckets_published = 0;

  // Matches every group again (a new rules snapshot).
  void rematch();
  // The group for a bucket, made (and matched) on first use.
  const std::shared_ptr<bucket_group>& group_for(std::string_view domain,
                                                 const envoy::service::rate_limit_quota::v3::BucketId& id);
  // A bucket's plan from every client's demand for it (fleet_demands), once per plan period; then each
  // client's assignment from it.
  group_plan plan_for(const bucket_group& g, const std::vector<double>& fleet_demands) const;
  assignment assign(const stream_bucket& b, const group_plan& p) const;
  // Every client's demand for a group, fleet-wide (this worker's as published).
  void fleet_demands(const bucket_group& g, std::vector<double>& out) const;
  // This client's demand as the plan sees it: unmeasured yet means it may want the whole budget.
  double demand_of(const stream_bucket& b) const;
  // One plan period: idle buckets abandoned, demand published, shares planned, changed assignments pushed.
  void plan();
  void schedule(const std::shared_ptr<worker_state>& self);

 private:
  void abandon_idle(std::int64_t now);
  void publish_demand();
  void push_changes(quota_stream& stream, std::int64_t now);
  void publish_assigned(bucket_group& g);
  static bool share_moved(const stream_bucket& b, const assignment& a);
  bool resend_due(const stream_bucket& b, std::int64_t now) const;
  void update_gauges();
};

}  // namespace sluice::ratelimit::rlqs
