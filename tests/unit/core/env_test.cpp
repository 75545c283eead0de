#include <doctest/doctest.h>

#include "core/env.hpp"
#include "core/health.hpp"
#include "core/workers.hpp"

using namespace sluice::core;
using namespace std::chrono_literals;

TEST_CASE("env_reader: defaults, Go bool and duration formats, and errors naming the variable") {
  env_reader env({{"B", "T"},
                  {"B0", "0"},
                  {"BAD", "yes"},
                  {"N", "42"},
                  {"EMPTY", ""},
                  {"D", "1m30s"},
                  {"F", "0.5"},
                  {"C", "Json"}});
  CHECK(env.get_bool("B", false));
  CHECK_FALSE(env.get_bool("B0", true));
  CHECK(env.get_bool("MISSING", true));
  CHECK(env.get_bool("EMPTY", true));
  CHECK_THROWS_WITH_AS(
      env.get_bool("BAD", false),
      "invalid value 'yes' for BAD: expected true or false (also 1, t, T, TRUE, True; 0, f, F, FALSE, False)",
      settings_error);
  CHECK(env.get_uint("N", 1, 0, 100) == 42);
  CHECK_THROWS_WITH_AS(env.get_uint("N", 1, 0, 10),
                       "invalid value '42' for N: expected a whole number from 0 to 10", settings_error);
  CHECK(env.get_duration("D", 1s) == 90s);
  CHECK(env.get_double("F", 0.8, 0, 1) == 0.5);
  CHECK_THROWS_AS(env.get_double("D", 0.8, 0, 1), settings_error);
  CHECK(env.get_choice("C", "text", {"text", "json"}, true) == "json");
  CHECK_THROWS_WITH_AS(env.get_choice("C", "text", {"text", "json"}, false),
                       "invalid value 'Json' for C: expected one of text, json", settings_error);
}

TEST_CASE("parse_go_duration") {
  CHECK(parse_go_duration("0") == 0ns);
  CHECK(parse_go_duration("150us") == 150us);
  CHECK(parse_go_duration("1.5h") == 90min);
  CHECK(parse_go_duration("2h45m") == 165min);
  CHECK(parse_go_duration("-1s") == -1s);
  CHECK_FALSE(parse_go_duration("10"));
  CHECK_FALSE(parse_go_duration("1x"));
  CHECK_FALSE(parse_go_duration(""));
}

TEST_CASE("format_go_duration prints as Go's time.Duration.String()") {
  CHECK(format_go_duration(0ns) == "0s");
  CHECK(format_go_duration(5s) == "5s");
  CHECK(format_go_duration(250ms) == "250ms");
  CHECK(format_go_duration(1500us) == "1.5ms");
  CHECK(format_go_duration(1500ns) == "1.5\u00b5s");
  CHECK(format_go_duration(7ns) == "7ns");
  CHECK(format_go_duration(1500ms) == "1.5s");
  CHECK(format_go_duration(90s) == "1m30s");
  CHECK(format_go_duration(1h) == "1h0m0s");
  CHECK(format_go_duration(2h + 45min + 1ms) == "2h45m0.001s");
  CHECK(format_go_duration(-1s) == "-1s");
}

TEST_CASE("health: healthy only while every component is, observers see each change") {
  health h;
  std::vector<bool> seen;
  h.on_change([&](bool v) { seen.push_back(v); });
  auto a = h.add_component("sigterm", true);
  auto b = h.add_component("config", false);
  CHECK_FALSE(h.healthy());
  h.set(b, true);
  CHECK(h.healthy());
  h.set(a, false);
  CHECK_FALSE(h.healthy());
  CHECK(seen == std::vector<bool>{true, false, true, false});
}

TEST_CASE("IO_THREADS default: a cgroup v2 cpu.max quota, rounded up") {
  using sluice::core::cpus_of_quota;
  CHECK(cpus_of_quota("max 100000") == 0);
  CHECK(cpus_of_quota("100000 100000") == 1);
  CHECK(cpus_of_quota("150000 100000") == 2);
  CHECK(cpus_of_quota("50000 100000") == 1);
  CHECK(cpus_of_quota("800000 100000") == 8);
  CHECK(cpus_of_quota("") == 0);
  CHECK(cpus_of_quota("garbage") == 0);
  CHECK(sluice::core::usable_cpus() >= 1);
}
