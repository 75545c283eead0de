#include <doctest/doctest.h>

#include "ratelimit/backends/redis/gcra_expiry.hpp"

using sluice::ratelimit::backends::redis::gcra_expiry;

TEST_CASE("gcra_expiry: a key's PEXPIRE is due once a second, or when its tolerance grows") {
  gcra_expiry expiry;
  CHECK(expiry.due("a", 0, 5'000));
  CHECK_FALSE(expiry.due("a", 999'999, 5'000));
  CHECK_FALSE(expiry.due("a", 500'000, 4'000));  // a shorter tolerance is covered
  CHECK(expiry.due("a", 600'000, 6'000));
  CHECK_FALSE(expiry.due("a", 1'599'999, 6'000));
  CHECK(expiry.due("a", 1'600'000, 6'000));
  CHECK(expiry.due("b", 1'600'000, 6'000));  // keys apart
  CHECK(expiry.due("b", 1'599'999,
                   6'000));  // the clock set back: the PEXPIRE's second is not known to cover it
  expiry.forget(gcra_expiry::hash("b"));
  CHECK(expiry.due("b", 1'600'001, 6'000));
}

TEST_CASE("gcra_expiry: beyond its capacity a key is not remembered, until older ones are due") {
  gcra_expiry expiry(2);
  CHECK(expiry.due("a", 0, 1));
  CHECK(expiry.due("b", 500'000, 1));
  CHECK(expiry.due("c", 600'000, 1));  // full: c is not remembered
  CHECK(expiry.due("c", 700'000, 1));
  CHECK(expiry.size() == 2);
  CHECK_FALSE(expiry.due("a", 900'000, 1));
  // At 1 s, a is due again and makes room: c is remembered.
  CHECK(expiry.due("c", 1'000'000, 1));
  CHECK_FALSE(expiry.due("c", 1'100'000, 1));
  CHECK_FALSE(expiry.due("b", 1'100'000, 1));
  CHECK(expiry.size() == 2);
  CHECK(expiry.due("a", 1'200'000, 1));  // forgotten to make room, and not remembered: b and c are recent
  CHECK(expiry.due("a", 1'300'000, 1));
}
