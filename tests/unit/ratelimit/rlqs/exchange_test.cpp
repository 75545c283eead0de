// The demand exchanges: in_process_exchange (one process's workers) and the Redis exchange's field format,
// "<unix ms>|<demand>,<demand>,..." (rlqs_exchange::encode / decode).

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ratelimit/backends/redis/rlqs_exchange.hpp"
#include "ratelimit/rlqs/demand_exchange.hpp"

namespace rlqs = sluice::ratelimit::rlqs;
using sluice::ratelimit::backends::redis::rlqs_exchange;

TEST_CASE("rlqs_exchange::encode: milliseconds, a bar, demands with three decimals") {
  CHECK(rlqs_exchange::encode(1700000000123, {1.5, 0, 2.25}) == "1700000000123|1.500,0.000,2.250");
  CHECK(rlqs_exchange::encode(42, {}) == "42|");
  CHECK(rlqs_exchange::encode(7, {1.23456}) == "7|1.235");
}

TEST_CASE("rlqs_exchange: encode then decode gives the demands back (to three decimals)") {
  const std::vector<double> demands{0, 0.001, 1.5, 12345.678, 1e6};
  std::int64_t ms = 0;
  std::vector<double> back;
  REQUIRE(rlqs_exchange::decode(rlqs_exchange::encode(1700000000123, demands), ms, back));
  CHECK(ms == 1700000000123);
  REQUIRE(back.size() == demands.size());
  for (std::size_t i = 0; i < demands.size(); ++i)
    CHECK(back[i] == doctest::Approx(demands[i]).epsilon(1e-6));

  SUBCASE("no demands") {
    std::vector<double> none;
    REQUIRE(rlqs_exchange::decode(rlqs_exchange::encode(5, {}), ms, none));
    CHECK(ms == 5);
    CHECK(none.empty());
  }
  SUBCASE("rounded to three decimals") {
    std::vector<double> one;
    REQUIRE(rlqs_exchange::decode(rlqs_exchange::encode(5, {1.23456}), ms, one));
    REQUIRE(one.size() == 1);
    CHECK(one[0] == doctest::Approx(1.235));
  }
}

TEST_CASE("rlqs_exchange::decode refuses what another replica could not have written") {
  const char* bad[] = {
      "",               // nothing
      "1700000000123",  // no '|'
      "1.5,2.5",        // no '|'
      "|1.0",           // no time
      "abc|1.0",        // not a number
      "17x00|1.0",      // not a number (garbage after the digits)
      "1700000000123|x",
      "1700000000123|1.0,abc",
      "1700000000123|1.5x",      // garbage after a demand
      "1700000000123|1.0,,2.0",  // an empty demand
      "1700000000123|-1.0",      // a negative demand
      "1700000000123|1.0,-0.5",
      "1700000000123|nan",
  };
  for (const char* text : bad) {
    CAPTURE(std::string(text));
    std::int64_t ms = 0;
    std::vector<double> demands;
    CHECK_FALSE(rlqs_exchange::decode(text, ms, demands));
  }
}

TEST_CASE("in_process_exchange: publish replaces a worker's needs; collect gathers every worker's") {
  rlqs::in_process_exchange ex(3);
  CHECK(ex.budget_fraction() == 1.0);
  ex.publish(0, {{"b1", {1, 2}}});
  ex.publish(1, {{"b1", {3}}, {"b2", {4}}});

  std::vector<double> out;
  ex.collect("b1", out, rlqs::demand_exchange::no_worker);
  CHECK(out == std::vector<double>{1, 2, 3});  // worker by worker
  out.clear();
  ex.collect("b2", out, rlqs::demand_exchange::no_worker);
  CHECK(out == std::vector<double>{4});
  out.clear();
  ex.collect("nothing", out, rlqs::demand_exchange::no_worker);
  CHECK(out.empty());

  SUBCASE("collect appends") {
    std::vector<double> more{9};
    ex.collect("b2", more, rlqs::demand_exchange::no_worker);
    CHECK(more == std::vector<double>{9, 4});
  }
  SUBCASE("a worker's new publication replaces its old one") {
    ex.publish(0, {{"b2", {5}}});
    ex.collect("b1", out, rlqs::demand_exchange::no_worker);
    CHECK(out == std::vector<double>{3});  // worker 0's {1, 2} is gone
    out.clear();
    ex.collect("b2", out, rlqs::demand_exchange::no_worker);
    CHECK(out == std::vector<double>{5, 4});
    ex.publish(1, {});
    out.clear();
    ex.collect("b1", out, rlqs::demand_exchange::no_worker);
    CHECK(out.empty());
  }
  SUBCASE("the calling worker's own needs are left out (it adds its current ones)") {
    ex.collect("b1", out, 0);
    CHECK(out == std::vector<double>{3});
    out.clear();
    ex.collect("b1", out, 1);
    CHECK(out == std::vector<double>{1, 2});
  }
  SUBCASE("a worker past the count is ignored") {
    ex.publish(3, {{"b1", {100}}});
    ex.collect("b1", out, rlqs::demand_exchange::no_worker);
    CHECK(out == std::vector<double>{1, 2, 3});
  }
  SUBCASE("snapshot: every worker's needs per bucket") {
    ex.publish(2, {{"b2", {6, 7}}});
    rlqs::demand_map all;
    ex.snapshot(all);
    CHECK(all.size() == 2);
    CHECK(all["b1"] == std::vector<double>{1, 2, 3});
    CHECK(all["b2"] == std::vector<double>{4, 6, 7});
  }
}
