#include "ratelimit/rlqs/bucket_key.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <charconv>

#include "rlqs.pb.h"

namespace sluice::ratelimit::rlqs {

namespace {

void append_field(std::string& out, std::string_view s) {
  char digits[20];
  const auto end = std::to_chars(digits, digits + sizeof digits, s.size()).ptr;
  out.append(digits, end);
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
  canonical_of(domain, id, k.canonical);
  return k;
}

void bucket_key::canonical_of(std::string_view domain,
                              const envoy::service::rate_limit_quota::v3::BucketId& id, std::string& out) {
  // A bucket has a few pairs: sorting pointers to them on the stack costs less than copying them.
  boost::container::small_vector<const google::protobuf::MapPair<std::string, std::string>*, 8> sorted;
  for (const auto& pair : id.bucket()) sorted.push_back(&pair);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  out.clear();
  append_field(out, domain);
  for (const auto* pair : sorted) {
    append_field(out, pair->first);
    append_field(out, pair->second);
  }
}

std::vector<config::entry> bucket_key::entries() const {
  std::vector<config::entry> out;
  out.reserve(pairs.size());
  for (const auto& [key, value] : pairs) out.push_back({key, value});
  return out;
}

}  // namespace sluice::ratelimit::rlqs
