#include <doctest/doctest.h>

#include "ratelimit/backends/redis/gcra_expiry.hpp"

using sluice::ratelimit::backends::redis::gcra_expiry;

namespace {

bool due(gcra_expiry& expiry, std::string_view key, std::int64_t now_us, std::int64_t tolerance_us) {
  return expiry.due(gcra_expiry::hash(key), now_us, tolerance_us);
}

}  // namespace

TEST_CASE("gcra_expiry: a key's PEXPIRE is due once a second, or when its tolerance grows") {
  gcra_expiry expiry;
  CHECK(due(expiry, "a", 0, 5'000));
  CHECK_FALSE(due(expiry, "a", 999'999, 5'000));
  CHECK_FALSE(due(expiry, "a", 500'000, 4'000));  // a shorter tolerance is covered
  CHECK(due(expiry, "a", 600'000, 6'000));
  CHECK_FALSE(due(expiry, "a", 1'599'999, 6'000));
  CHECK(due(expiry, "a", 1'600'000, 6'000));
  CHECK(due(expiry, "b", 1'600'000, 6'000));  // keys apart
  CHECK(due(expiry, "b", 1'599'999,
            6'000));  // the clock set back: the PEXPIRE's second is not known to cover it
  expiry.forget(gcra_expiry::hash("b"));
  CHECK(due(expiry, "b", 1'600'001, 6'000));
}

TEST_CASE("gcra_expiry: beyond its capacity a key is not remembered, until older ones are due") {
  gcra_expiry expiry(2);
  CHECK(due(expiry, "a", 0, 1));
  CHECK(due(expiry, "b", 500'000, 1));
  CHECK(due(expiry, "c", 600'000, 1));  // full: c is not remembered
  CHECK(due(expiry, "c", 700'000, 1));
  CHECK(expiry.size() == 2);
  CHECK_FALSE(due(expiry, "a", 900'000, 1));
  // At 1 s, a is due again and makes room: c is remembered.
  CHECK(due(expiry, "c", 1'000'000, 1));
  CHECK_FALSE(due(expiry, "c", 1'100'000, 1));
  CHECK_FALSE(due(expiry, "b", 1'100'000, 1));
  CHECK(expiry.size() == 2);
  CHECK(due(expiry, "a", 1'200'000, 1));  // forgotten to make room, and not remembered: b and c are recent
  CHECK(due(expiry, "a", 1'300'000, 1));
}
