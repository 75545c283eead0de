#include "ratelimit/rlqs/bucket_key.hpp"

#include <algorithm>

#include "rlqs.pb.h"

namespace sluice::ratelimit::rlqs {

namespace {

void append_field(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

}  // namespace

bucket_key bucket_key::of(std::string_view domain, const envoy::service::rate_limit_quota::v3::BucketId& id) {
  bucket_key k;
  k.domain = domain;
  k.pairs.reserve(id.bucket_size());
  for (const auto& [key, value] : id.bucket()) k.pairs.emplace_back(key, value);
  std::sort(k.pairs.begin(), k.pairs.end());
  append_field(k.canonical, domain);
  for (const auto& [key, value] : k.pairs) {
    append_field(k.canonical, key);
    append_field(k.canonical, value);
  }
  return k;
}

std::vector<config::entry> bucket_key::entries() const {
  std::vector<config::entry> out;
  out.reserve(pairs.size());
  for (const auto& [key, value] : pairs) out.push_back({key, value});
  return out;
}

}  // namespace sluice::ratelimit::rlqs
