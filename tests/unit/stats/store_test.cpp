#include <doctest/doctest.h>

#include <map>

#include "stats/store.hpp"
#include "stats/text_dump.hpp"

using namespace sluice::stats;

TEST_CASE("store: a name always gives the same stat") {
  store s;
  s.get_counter("a.b").add(2);
  s.get_counter("a.b").inc();
  CHECK(s.get_counter("a.b").value() == 3);
  s.get_gauge("g").set(-4);
  s.get_gauge("g").add(1);
  CHECK(s.get_gauge("g").value() == -3);
  s.get_timer("t").record(1.5);
  s.get_timer("t").record(2.5);
  CHECK(s.get_timer("t").count() == 2);
  CHECK(s.get_timer("t").sum_milliseconds() == doctest::Approx(4.0));
}

TEST_CASE("store: request-built names are bounded, the rest go to the overflow series") {
  store s(3);
  for (int i = 0; i < 5; ++i) s.get_counter_bounded("dyn." + std::to_string(i), "dyn.overflow").inc();
  s.get_counter_bounded("dyn.0", "dyn.overflow").inc();  // an existing name keeps counting in place
  std::map<std::string, std::uint64_t> seen;
  s.for_each_counter([&](const std::string& name, const counter& c) { seen[name] = c.value(); });
  CHECK(seen ==
        std::map<std::string, std::uint64_t>{{"dyn.0", 2}, {"dyn.1", 1}, {"dyn.2", 1}, {"dyn.overflow", 2}});
  CHECK(s.dynamic_series() == 3);
  // fixed names are not bounded
  s.get_counter("fixed").inc();
  CHECK(s.get_counter("fixed").value() == 1);
}

TEST_CASE("store: the active observer sees every timer observation") {
  struct recorder : timer_observer {
    std::vector<std::pair<std::string, double>> seen;
    void observe(timer& t, double ms) override { seen.emplace_back(t.name(), ms); }
  } r;
  store s;
  auto& t = s.get_timer("x.response_time");
  t.record(1);
  s.set_timer_observer(&r);
  t.record(2);
  s.get_timer("y").record(3);  // also timers created after the observer was set
  s.set_timer_observer(nullptr);
  t.record(4);
  CHECK(r.seen == std::vector<std::pair<std::string, double>>{{"x.response_time", 2}, {"y", 3}});
}

TEST_CASE("store: generators run before a dump") {
  store s;
  int runs = 0;
  s.add_generator([&] { s.get_gauge("gen").set(++runs); });
  s.get_counter("c").add(7);
  s.get_timer("t").record(2);
  CHECK(text_dump(s) == "c: 7\ngen: 1\nt: count=1 sum_ms=2\n");
  CHECK(text_dump(s) == "c: 7\ngen: 2\nt: count=1 sum_ms=2\n");
}

TEST_CASE("sanitize_stat_name: upstream's replacements") {
  CHECK(sanitize_stat_name("a:b|c") == "a_b_c");
  CHECK(sanitize_stat_name("d.remote_address_10.0.0.66") == "d.remote_address_10_0_0_66");
  CHECK(sanitize_stat_name("d.k_1.2.3.4.5") == "d.k_1_2_3_4.5");
  CHECK(sanitize_stat_name("d.ip_1234.5.6.7") == "d.ip_1234_5_6_7");  // the regex finds 234.5.6.7
  CHECK(sanitize_stat_name("d.v_1.2.3") == "d.v_1.2.3");              // not a dotted quad
  CHECK(sanitize_stat_name("d.k_1.2.3.4567") == "d.k_1_2_3_4567");    // the last part takes three digits
  CHECK(sanitize_stat_name("plain.name") == "plain.name");
}
