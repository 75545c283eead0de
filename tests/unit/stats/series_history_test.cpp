#include "stats/series_history.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <set>

using namespace sluice::stats;

namespace {

const series_history::rule_series* find(const std::vector<series_history::rule_series>& all,
                                        const std::string& key) {
  for (const auto& s : all)
    if (s.key == key) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("series_history: rates per key and per watched counter, oldest first, the last `points` kept") {
  store s;
  auto& hits = s.get_counter("ratelimit.service.rate_limit.d.k.total_hits");
  auto& over = s.get_counter("ratelimit.service.rate_limit.d.k.over_limit");
  s.get_counter("ratelimit.service.rate_limit.d.k.near_limit");
  s.get_counter("ratelimit.service.config_load_success").add(5);  // neither a rule nor watched
  auto& errors = s.get_counter("errors");
  auto& latency = s.get_timer("latency");
  series_history h(s, {"errors"}, {"latency"}, 3);

  hits.add(100);  // before the first sample: the baseline, never a rate
  h.sample(1000.0, 1000.0);
  CHECK(h.times().empty());
  CHECK(find(h.rules(), "d.k")->hits.empty());

  hits.add(20);
  over.add(4);
  errors.add(1);
  latency.record(2.0);
  latency.record(4.0);
  h.sample(1002.0, 1002.0);  // two seconds: per-second rates
  auto rules = h.rules();
  REQUIRE(find(rules, "d.k") != nullptr);
  CHECK(find(rules, "d.k")->hits == std::vector<float>{10.0F});
  CHECK(find(rules, "d.k")->over_limit == std::vector<float>{2.0F});
  CHECK(find(rules, "d.k")->near_limit == std::vector<float>{0.0F});
  CHECK(h.total("errors") == std::vector<float>{0.5F});
  CHECK(h.timer_mean_ms() == std::vector<float>{3.0F});
  CHECK(h.times() == std::vector<double>{1002.0});

  // A key first seen gives its baseline (its counter may be older than the history): rates from the next.
  auto& fresh = s.get_counter("ratelimit.service.rate_limit.d.fresh.total_hits");
  fresh.add(7);
  h.sample(1003.0, 1003.0);
  fresh.add(2);
  h.sample(1004.0, 1004.0);
  hits.add(3);
  h.sample(1005.0, 1005.0);
  rules = h.rules();
  CHECK(find(rules, "d.fresh")->hits == std::vector<float>{0.0F, 2.0F, 0.0F});
  CHECK(find(rules, "d.k")->hits == std::vector<float>{0.0F, 0.0F, 3.0F});
  CHECK(h.times() == std::vector<double>{1003.0, 1004.0, 1005.0});
  CHECK(h.timer_mean_ms() == std::vector<float>{0.0F, 0.0F, 0.0F});
  CHECK(h.total("unknown").empty());
  // A clock that did not move: no sample.
  h.sample(1005.0, 1005.0);
  CHECK(h.times().size() == 3);
}

TEST_CASE(
    "series_history: at most max_keys keys; a new one takes the place of one idle for the whole history") {
  store s;
  std::vector<counter*> c;
  for (int i = 0; i < 5; ++i)
    c.push_back(&s.get_counter("ratelimit.service.rate_limit.d.k" + std::to_string(i) + ".total_hits"));
  series_history h(s, {}, {"latency"}, 4, 3);
  double t = 1.0;
  h.sample(t, t);
  CHECK(h.rules().size() == 3);
  CHECK(h.untracked_keys() == 2);
  std::set<std::string> first;
  for (const auto& r : h.rules()) first.insert(r.key);
  for (int i = 0; i < 6; ++i) {  // busy: nobody makes room
    for (auto* k : c) k->inc();
    t += 1;
    h.sample(t, t);
    CHECK(h.untracked_keys() == 2);
  }
  for (int i = 0; i < 4; ++i) {  // four quiet samples: the held keys are idle for the whole history
    t += 1;
    h.sample(t, t);
  }
  t += 1;
  h.sample(t, t);  // the two others take two idle places (keys let go wait)
  std::set<std::string> now;
  for (const auto& r : h.rules()) now.insert(r.key);
  CHECK(now.size() == 3);
  std::vector<std::string> young;
  std::set_difference(now.begin(), now.end(), first.begin(), first.end(), std::back_inserter(young));
  CHECK(young.size() == 2);
  for (int i = 0; i < 3; ++i) {  // and stay: a key followed for less than the whole history is never idle
    t += 1;
    h.sample(t, t);
  }
  for (const auto& key : young) CHECK(find(h.rules(), key) != nullptr);
}

TEST_CASE("series_history: rates by the steady clock, times by the wall clock (which may step back)") {
  store s;
  auto& hits = s.get_counter("ratelimit.service.rate_limit.d.k.total_hits");
  series_history h(s, {}, {"latency"}, 4);
  h.sample(5000.0, 10.0);
  hits.add(8);
  h.sample(4000.0, 12.0);  // the wall clock stepped back: the sample still counts, over 2 s
  CHECK(find(h.rules(), "d.k")->hits == std::vector<float>{4.0F});
  CHECK(h.times() == std::vector<double>{4000.0});
  h.sample(4001.0, 12.0);  // no steady time passed: no sample
  CHECK(h.times().size() == 1);
}
