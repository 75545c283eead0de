#pragma once
// Everything one worker knows about one bucket (domain + bucket_id): the rule it matches, what that means
// (allow all, deny all, or a budget shared by every client), the clients (stream buckets) that report it
// here, and their stats. Re-matched on every rules reload.

#include <memory>
#include <string>
#include <vector>

#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/rlqs/assignment.hpp"
#include "ratelimit/rlqs/bucket_key.hpp"
#include "rlqs.pb.h"
#include "stats/store.hpp"

namespace sluice::ratelimit::rlqs {

struct stream_bucket;

// What the bucket's rule means for quota.
struct policy {
  enum class kind : std::uint8_t {
    allow_all,  // no rule matches, `unlimited`, or shadow_mode
    deny_all,   // requests_per_unit: 0
    shared,     // the budget, shared fairly by every client in the fleet
  } what = kind::allow_all;
  rlqs::budget budget;
  bool shadow_mode = false;
  std::string rule;  // the matched rule's stats key; empty when none matches
};

// The policy for a bucket under `rules` (null: no rules loaded yet).
policy match_policy(const config::rule_set* rules, std::string_view domain, const bucket_key& key);

// Per rule, what clients report and what they are assigned (ratelimit.service.rate_limit.<rule>.rlqs_*).
struct rule_quota_stats {
  stats::counter* allowed = nullptr;
  stats::counter* denied = nullptr;
  stats::gauge* assigned = nullptr;  // the shares assigned on this instance, in requests per rule window
  static rule_quota_stats make(stats::store& store, const std::string& rule);
};

struct bucket_group {
  bucket_key key;
  envoy::service::rate_limit_quota::v3::BucketId id;  // sent back in every action (map order is not data)
  policy rule;
  rule_quota_stats stats;
  std::vector<stream_bucket*> members;
  std::int64_t assigned_published = 0;  // this group's part of stats.assigned
};

}  // namespace sluice::ratelimit::rlqs
