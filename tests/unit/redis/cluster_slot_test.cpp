#include <doctest/doctest.h>

#include "redis/cluster_slot.hpp"

using sluice::redis::hash_slot;

// Expected values are what a real Redis 7 answers to CLUSTER KEYSLOT.
TEST_CASE("hash_slot is CRC16 modulo 16384, as Redis computes it") {
  CHECK(hash_slot("foo") == 12182);
  CHECK(hash_slot("bar") == 5061);
  CHECK(hash_slot("123456789") == 12739);
  CHECK(hash_slot("") == 0);
}

TEST_CASE("hash_slot uses the first non-empty hash tag") {
  CHECK(hash_slot("{user1000}.following") == 3443);
  CHECK(hash_slot("{user1000}.followers") == 3443);
  CHECK(hash_slot("user1000") == 3443);
  CHECK(hash_slot("foo{}{bar}") == 8363);     // an empty first tag: the whole key counts
  CHECK(hash_slot("foo{{bar}}zap") == 4015);  // the tag is "{bar"
}
