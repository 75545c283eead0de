#include "auth/verified_cache.hpp"

#include <doctest/doctest.h>

#include <string>

using sluice::auth::jwt_claims;
using sluice::auth::verified_cache;

TEST_CASE("verified cache entries last until their expiry") {
  verified_cache cache(100);
  jwt_claims claims;
  claims.subject = "s";
  cache.insert("t", claims, 1000, 900);
  REQUIRE(cache.find("t", 1000));
  CHECK(cache.find("t", 1000)->subject == "s");
  CHECK_FALSE(cache.find("t", 1001));
  CHECK_FALSE(cache.find("t", 1000));
}

TEST_CASE("verified cache stays bounded") {
  verified_cache cache(32);
  for (int i = 0; i < 1000; ++i) cache.insert(std::to_string(i), jwt_claims{}, 2000, 1000);
  int kept = 0;
  for (int i = 0; i < 1000; ++i) kept += cache.find(std::to_string(i), 1000) ? 1 : 0;
  CHECK(kept <= 32);
  CHECK(kept > 0);
  CHECK(cache.find("999", 1000));
}

TEST_CASE("a zero-sized verified cache keeps nothing") {
  verified_cache cache(0);
  cache.insert("t", jwt_claims{}, 2000, 1000);
  CHECK_FALSE(cache.find("t", 1000));
}
