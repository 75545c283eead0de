#include "core/setting.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

#include "core/env.hpp"

using namespace sluice::core;
using namespace std::chrono_literals;

namespace {

constexpr setting port{"PORT", "whole number", "8080", "HTTP port"};
constexpr setting grace{"SHUTDOWN_GRACE_PERIOD", "duration", "10s", "how long calls may take"};
constexpr setting flag{"FLAG", "bool", "true", "a flag"};
constexpr setting ratio{"RATIO", "number", "0.8", "a share"};
constexpr setting name{"NAME", "text", "default", "a name"};
constexpr setting threads{"IO_THREADS", "whole number", "(the CPUs)", "worker threads"};
constexpr setting broken{"BROKEN", "duration", "ten seconds", "a default that does not parse"};

}  // namespace

TEST_CASE("env_reader through declarations: the declared default when unset or empty, the value when set") {
  env_reader unset(std::map<std::string, std::string>{{"NAME", ""}});
  CHECK(unset.get_uint(port, 0, 65535) == 8080);
  CHECK(unset.get_duration(grace) == 10s);
  CHECK(unset.get_bool(flag));
  CHECK(unset.get_double(ratio, 0, 1) == doctest::Approx(0.8));
  CHECK(unset.get_string(name) == "default");
  CHECK(unset.get_uint(threads, 7, 1, 1024) == 7);  // computed at start-up: given by the code
  env_reader set({{"PORT", "9000"}, {"SHUTDOWN_GRACE_PERIOD", "1m"}, {"FLAG", "false"}, {"NAME", "x"}});
  CHECK(set.get_uint(port, 0, 65535) == 9000);
  CHECK(set.get_duration(grace) == 60s);
  CHECK_FALSE(set.get_bool(flag));
  CHECK(set.get_string(name) == "x");
  CHECK_THROWS_WITH_AS(env_reader(std::map<std::string, std::string>{{"PORT", "x"}}).get_uint(port, 0, 65535),
                       "invalid value 'x' for PORT: expected a whole number from 0 to 65535", settings_error);
}

TEST_CASE(
    "env_reader through declarations: a default that does not parse, or a computed one not given, is a bug") {
  env_reader env(std::map<std::string, std::string>{});
  CHECK_THROWS_AS(env.get_duration(broken), std::logic_error);
  CHECK_THROWS_AS(env.get_uint(threads, 1, 1024), std::logic_error);
  CHECK_THROWS_AS(env.get_uint(port, 1, 1, 1024), std::logic_error);
}

TEST_CASE("env_reader::names lists the environment's variables") {
  env_reader env({{"A", "1"}, {"B", ""}});
  CHECK(env.names() == std::vector<std::string>{"A", "B"});
}

TEST_CASE("setting_family: the first prefix's members, then each variant's, with its note and own defaults") {
  static constexpr setting first[]{{"REDIS_URL", "text", "/main.sock", "where"},
                                   {"REDIS_TLS", "bool", "false", "tls"}};
  const setting_family family(first, "REDIS_",
                              {{"REDIS_PERSECOND_", "per-second store: ", {{"URL", "/ps.sock"}}}});
  REQUIRE(family.all().size() == 4);
  CHECK(family.at("REDIS_", "URL").default_value == "/main.sock");
  const auto& ps = family.at("REDIS_PERSECOND_", "URL");
  CHECK(ps.name == "REDIS_PERSECOND_URL");
  CHECK(ps.default_value == "/ps.sock");
  CHECK(ps.meaning == "per-second store: where");
  CHECK(family.at("REDIS_PERSECOND_", "TLS").default_value == "false");
  CHECK_THROWS_AS(family.at("REDIS_", "PORT"), std::logic_error);
  env_reader env(std::map<std::string, std::string>{{"REDIS_PERSECOND_URL", "/other.sock"}});
  CHECK(env.get_string(family.at("REDIS_PERSECOND_", "URL")) == "/other.sock");
  CHECK(env.get_string(family.at("REDIS_", "URL")) == "/main.sock");
}

TEST_CASE("edit_distance: insertions, deletions, substitutions and swaps, capped") {
  CHECK(edit_distance("BACKEND_TYPE", "BACKEND_TYPE", 2) == 0);
  CHECK(edit_distance("BACKEND_TYP", "BACKEND_TYPE", 2) == 1);
  CHECK(edit_distance("BAKCEND_TYPE", "BACKEND_TYPE", 2) == 1);  // a swap of neighbours
  CHECK(edit_distance("REDIS_URLS", "REDIS_URL", 2) == 1);
  CHECK(edit_distance("REDIS_SOKET_TIPE", "REDIS_SOCKET_TYPE", 2) == 2);
  CHECK(edit_distance("REDIS_PORT", "REDIS_URL", 2) == 3);  // farther than asked: most + 1
  CHECK(edit_distance("A", "ABCDEF", 2) == 3);
}
