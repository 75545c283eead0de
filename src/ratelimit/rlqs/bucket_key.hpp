#pragma once
// A bucket as the rules and the exchange see it: the stream's domain and the bucket_id's pairs sorted by key
// (a bucket_id is a map: {a:A,b:B} is {b:B,a:A}). The canonical key is length-prefixed, so no key or value
// can make two buckets collide, and is the same in every replica (it names the bucket in Redis).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/config/rule_set.hpp"

namespace envoy::service::rate_limit_quota::v3 {
class BucketId;
}

namespace sluice::ratelimit::rlqs {

struct bucket_key {
  std::string domain;
  std::string canonical;
  std::vector<std::pair<std::string, std::string>> pairs;  // sorted by key

  static bucket_key of(std::string_view domain, const envoy::service::rate_limit_quota::v3::BucketId& id);
  // Only the canonical key, into `out` (reused: no allocation once it is large enough), for lookups.
  static void canonical_of(std::string_view domain, const envoy::service::rate_limit_quota::v3::BucketId& id,
                           std::string& out);
  // The pairs as a descriptor's entries, for the rule walk (views into `pairs`).
  std::vector<config::entry> entries() const;
};

}  // namespace sluice::ratelimit::rlqs
