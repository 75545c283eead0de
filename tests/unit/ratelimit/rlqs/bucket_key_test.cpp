// A bucket's canonical key (bucket_key.hpp): the domain and the bucket_id's pairs sorted by key, each field
// length-prefixed ("<length>:<bytes>"), so map order does not matter and no key or value can collide.

#include "ratelimit/rlqs/bucket_key.hpp"

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rlqs.pb.h"

namespace rlqs = sluice::ratelimit::rlqs;
using envoy::service::rate_limit_quota::v3::BucketId;

namespace {

BucketId id_of(const std::vector<std::pair<std::string, std::string>>& pairs) {
  BucketId id;
  for (const auto& [k, v] : pairs) (*id.mutable_bucket())[k] = v;
  return id;
}

}  // namespace

TEST_CASE("bucket_key: a bucket_id is a map, the order of its pairs does not matter") {
  const auto ab = rlqs::bucket_key::of("d", id_of({{"a", "A"}, {"b", "B"}}));
  const auto ba = rlqs::bucket_key::of("d", id_of({{"b", "B"}, {"a", "A"}}));
  CHECK(ab.canonical == ba.canonical);
  // "1:d" + "1:a" + "1:A" + "1:b" + "1:B"
  CHECK(ab.canonical == "1:d1:a1:A1:b1:B");
  CHECK(ab.domain == "d");
  CHECK(ab.pairs == ba.pairs);
  CHECK(ab.pairs == std::vector<std::pair<std::string, std::string>>{{"a", "A"}, {"b", "B"}});
}

TEST_CASE("bucket_key: keys and values with ':' or digits cannot make two buckets collide") {
  struct named {
    std::string domain;
    std::vector<std::pair<std::string, std::string>> pairs;
  };
  const std::vector<named> buckets = {
      {"d", {}},
      {"d", {{"", ""}}},
      {"d", {{"1:a", ""}}},             // "1:d" "3:1:a" "0:"
      {"d", {{"1", ":a"}}},             // "1:d" "1:1" "2::a"
      {"d", {{"1", "a0:"}}},            // would read as "1:1" "1:a" "0:" without lengths
      {"d", {{"a", "b"}, {"c", "d"}}},  // "1:a1:b1:c1:d"
      {"d", {{"a", "b1:c1:d"}}},        // the same bytes as the pair above without its lengths
      {"d", {{"10", "x"}}},             // "2:10" "1:x"
      {"d", {{"1", "0x"}}},             // "1:1" "2:0x"
      {"d", {{"1", "01:x"}}},
      {"d1:k1:v", {}},  // a domain that looks like a domain and a pair
      {"d", {{"k", "v"}}},
      {"", {{"d", ""}}},
      {"1:d", {}},
      {"d", {{"a:b", "c"}}},
      {"d", {{"a", "b:c"}}},
      {"d:a", {{"b", "c"}}},
  };
  std::set<std::string> seen;
  for (const auto& b : buckets) {
    const auto key = rlqs::bucket_key::of(b.domain, id_of(b.pairs));
    CAPTURE(key.canonical);
    CHECK(seen.insert(key.canonical).second);
  }
  CHECK(rlqs::bucket_key::of("d", id_of({{"1:a", ""}})).canonical == "1:d3:1:a0:");
  CHECK(rlqs::bucket_key::of("d", id_of({{"1", ":a"}})).canonical == "1:d1:12::a");
}

TEST_CASE("bucket_key: the domain is part of the key") {
  const auto id = id_of({{"tenant", "acme"}});
  CHECK(rlqs::bucket_key::of("one", id).canonical != rlqs::bucket_key::of("two", id).canonical);
  CHECK(rlqs::bucket_key::of("one", id).canonical == "3:one6:tenant4:acme");
}

TEST_CASE("bucket_key: entries() are the pairs sorted by key, as a descriptor's entries") {
  const auto key = rlqs::bucket_key::of("d", id_of({{"z", "1"}, {"a", "2"}, {"m", "3"}}));
  const auto entries = key.entries();
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].key == "a");
  CHECK(entries[0].value == "2");
  CHECK(entries[1].key == "m");
  CHECK(entries[1].value == "3");
  CHECK(entries[2].key == "z");
  CHECK(entries[2].value == "1");
  // Views into the key's own pairs.
  CHECK(entries[0].key.data() == key.pairs[0].first.data());
  CHECK(rlqs::bucket_key::of("d", BucketId{}).entries().empty());
}
