// Max-min fair shares (fair_share.hpp): plan_shares water-fills a budget among needs, needs_of turns measured
// demands into needs (headroom 1.1, floor budget × 5% ÷ n). Every expected value is worked out by hand.

#include "ratelimit/rlqs/fair_share.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace rlqs = sluice::ratelimit::rlqs;

namespace {

std::vector<double> shares(const rlqs::share_plan& plan, const std::vector<double>& needs) {
  std::vector<double> out;
  for (double n : needs) out.push_back(plan.share_for(n));
  return out;
}

double sum(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}

}  // namespace

TEST_CASE("plan_shares: needs under the budget get their need plus an equal part of the surplus") {
  // needs 10 + 20 + 30 = 60 of 100: surplus 40, 40 / 3 = 13.333.. each; no level (infinite).
  const std::vector<double> needs{10, 20, 30};
  const auto plan = rlqs::plan_shares(needs, 100);
  CHECK(std::isinf(plan.level));
  CHECK(plan.surplus_each == doctest::Approx(40.0 / 3));
  const auto s = shares(plan, needs);
  CHECK(s[0] == doctest::Approx(23.3333333333));  // 10 + 13.333..
  CHECK(s[1] == doctest::Approx(33.3333333333));  // 20 + 13.333..
  CHECK(s[2] == doctest::Approx(43.3333333333));  // 30 + 13.333..
  CHECK(sum(s) == doctest::Approx(100));

  SUBCASE("needs that add up to the budget exactly: no surplus, each gets its need") {
    const std::vector<double> exact{25, 75};
    const auto p = rlqs::plan_shares(exact, 100);
    CHECK(std::isinf(p.level));
    CHECK(p.surplus_each == 0);
    CHECK(shares(p, exact) == std::vector<double>{25, 75});
  }
}

TEST_CASE("plan_shares: one heavy client and many light ones over the budget") {
  // needs {1, 1, 1, 1, 100}, budget 20; sorted, left = 20:
  //   i=0: 20 / 5 = 4    > 1 → left 19;   i=1: 19 / 4 = 4.75 > 1 → left 18;
  //   i=2: 18 / 3 = 6    > 1 → left 17;   i=3: 17 / 2 = 8.5  > 1 → left 16;
  //   i=4: 16 / 1 = 16  <= 100 → level 16.
  // The light ones get their need (1 each, no surplus), the heavy one the level: 4 + 16 = 20.
  const std::vector<double> needs{1, 100, 1, 1, 1};
  const auto plan = rlqs::plan_shares(needs, 20);
  CHECK(plan.level == 16);
  CHECK(plan.surplus_each == 0);
  const auto s = shares(plan, needs);
  CHECK(s == std::vector<double>{1, 16, 1, 1, 1});
  CHECK(sum(s) == 20);
}

TEST_CASE("plan_shares: two heavy clients share what the light ones leave") {
  // needs {2, 10, 30, 40}, budget 40; sorted, left = 40:
  //   i=0: 40 / 4 = 10 > 2 → left 38;  i=1: 38 / 3 = 12.67 > 10 → left 28;  i=2: 28 / 2 = 14 <= 30 →
  //   level 14.
  // Shares 2, 10, 14, 14 = 40.
  const std::vector<double> needs{30, 2, 40, 10};
  const auto plan = rlqs::plan_shares(needs, 40);
  CHECK(plan.level == 14);
  const auto s = shares(plan, needs);
  CHECK(s == std::vector<double>{14, 2, 14, 10});
  CHECK(sum(s) == 40);
}

TEST_CASE("plan_shares: equal needs split the budget equally") {
  SUBCASE("over the budget") {
    // {50, 50, 50, 50} of 100: i=0: 100 / 4 = 25 <= 50 → level 25; 4 × 25 = 100.
    const std::vector<double> needs(4, 50);
    const auto plan = rlqs::plan_shares(needs, 100);
    CHECK(plan.level == 25);
    CHECK(shares(plan, needs) == std::vector<double>(4, 25));
  }
  SUBCASE("under the budget") {
    // {10, 10} of 100: surplus 80, 40 each → 50 and 50.
    const std::vector<double> needs(2, 10);
    const auto plan = rlqs::plan_shares(needs, 100);
    CHECK(std::isinf(plan.level));
    CHECK(plan.surplus_each == 40);
    CHECK(shares(plan, needs) == std::vector<double>(2, 50));
  }
  SUBCASE("a single client over the budget gets all of it") {
    // {1.25} of 1: i=0: 1 / 1 = 1 <= 1.25 → level 1.
    const std::vector<double> needs{1.25};
    const auto plan = rlqs::plan_shares(needs, 1);
    CHECK(plan.level == 1);
    CHECK(plan.share_for(1.25) == 1);
  }
}

TEST_CASE("plan_shares: no clients, an empty plan") {
  const auto plan = rlqs::plan_shares({}, 100);
  CHECK(std::isinf(plan.level));
  CHECK(plan.surplus_each == 0);
  CHECK(plan.share_for(7) == 7);  // no level, no surplus: a need is its share
}

TEST_CASE("plan_shares: the shares always add up to the budget") {
  // A spread of needs over and under a budget of 1000: Σ shares == 1000 whenever there is a client.
  for (int n = 1; n <= 40; ++n) {
    std::vector<double> needs;
    for (int i = 0; i < n; ++i)
      needs.push_back(static_cast<double>((i * 37 + n * 11) % 97) * (n % 3 + 1) * 3.7);
    for (double budget : {1.0, 50.0, 1000.0, 1e6}) {
      CAPTURE(n);
      CAPTURE(budget);
      const auto plan = rlqs::plan_shares(needs, budget);
      const auto s = shares(plan, needs);
      CHECK(sum(s) == doctest::Approx(budget).epsilon(1e-9));
      for (std::size_t i = 0; i < s.size(); ++i) CHECK(s[i] >= 0);
    }
  }
}

TEST_CASE("needs_of: demand × 1.1, never under budget × 0.05 ÷ n") {
  // budget 60, 3 clients: floor = 60 × 0.05 / 3 = 1. Demands {0, 8, 100} → {max(0, 1), 8 × 1.1, 100 × 1.1} =
  // {1, 8.8, 110} (1.1 is not exact in binary: compared approximately).
  const std::vector<double> demands{0, 8, 100};
  std::vector<double> out{99, 99};  // replaced, not appended to
  rlqs::needs_of(demands, 60, out);
  REQUIRE(out.size() == 3);
  CHECK(out[0] == doctest::Approx(1.0));
  CHECK(out[1] == doctest::Approx(8.8));
  CHECK(out[2] == doctest::Approx(110.0));

  SUBCASE("the floor shrinks with the number of clients") {
    // budget 1, 2 clients: floor = 1 × 0.05 / 2 = 0.025; demand 0.01 → 0.011 < 0.025 → 0.025; demand 0.1 →
    // 0.11 > 0.025 → 0.11.
    const std::vector<double> two{0.01, 0.1};
    rlqs::needs_of(two, 1, out);
    REQUIRE(out.size() == 2);
    CHECK(out[0] == doctest::Approx(0.025));
    CHECK(out[1] == doctest::Approx(0.11));
  }
  SUBCASE("no demands, no needs") {
    rlqs::needs_of({}, 60, out);
    CHECK(out.empty());
  }
  SUBCASE("the floors together are 5% of the budget") {
    const std::vector<double> idle(20, 0.0);
    rlqs::needs_of(idle, 200, out);
    CHECK(sum(out) == doctest::Approx(10.0));  // 20 × (200 × 0.05 / 20) = 10
  }
}
