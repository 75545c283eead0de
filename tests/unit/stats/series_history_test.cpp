#include "stats/series_history.hpp"

#include <doctest/doctest.h>

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
  series_history h(s, {"errors"}, "latency", 3);

  hits.add(100);  // before the first sample: the baseline, never a rate
  h.sample(1000.0);
  CHECK(h.times().empty());
  CHECK(find(h.rules(), "d.k")->hits.empty());

  hits.add(20);
  over.add(4);
  errors.add(1);
  latency.record(2.0);
  latency.record(4.0);
  h.sample(1002.0);  // two seconds: per-second rates
  auto rules = h.rules();
  REQUIRE(find(rules, "d.k") != nullptr);
  CHECK(find(rules, "d.k")->hits == std::vector<float>{10.0F});
  CHECK(find(rules, "d.k")->over_limit == std::vector<float>{2.0F});
  CHECK(find(rules, "d.k")->near_limit == std::vector<float>{0.0F});
  CHECK(h.total("errors") == std::vector<float>{0.5F});
  CHECK(h.timer_mean_ms() == std::vector<float>{3.0F});
  CHECK(h.times() == std::vector<double>{1002.0});

  // A key made since the last sample: all of its count is new.
  s.get_counter("ratelimit.service.rate_limit.d.fresh.total_hits").add(7);
  h.sample(1003.0);
  h.sample(1004.0);
  hits.add(3);
  h.sample(1005.0);
  rules = h.rules();
  CHECK(find(rules, "d.fresh")->hits == std::vector<float>{7.0F, 0.0F, 0.0F});
  CHECK(find(rules, "d.k")->hits == std::vector<float>{0.0F, 0.0F, 3.0F});
  CHECK(h.times() == std::vector<double>{1003.0, 1004.0, 1005.0});
  CHECK(h.timer_mean_ms() == std::vector<float>{0.0F, 0.0F, 0.0F});
  CHECK(h.total("unknown").empty());
  // A clock that did not move: no sample.
  h.sample(1005.0);
  CHECK(h.times().size() == 3);
}

TEST_CASE("series_history: at most max_keys keys, the rest counted as untracked") {
  store s;
  for (int i = 0; i < 5; ++i)
    s.get_counter("ratelimit.service.rate_limit.d.k" + std::to_string(i) + ".total_hits");
  series_history h(s, {}, "latency", 4, 3);
  h.sample(1.0);
  CHECK(h.rules().size() == 3);
  CHECK(h.untracked_keys() == 2);
}
