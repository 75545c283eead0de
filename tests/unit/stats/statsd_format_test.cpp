#include <doctest/doctest.h>

#include <numeric>

#include "stats/line_text.hpp"
#include "stats/statsd_format.hpp"
#include "stats/tags.hpp"

using namespace sluice::stats;

TEST_CASE("statsd lines, as gostats writes them") {
  statsd_format f(false, {}, {});
  std::string out;
  f.counter(out, "ratelimit.service.rate_limit.d.k_v.total_hits", 3);
  f.gauge(out, "ratelimit.redis_pool.cx_active", 2);
  f.gauge(out, "g", -1);
  f.timer(out, "ratelimit_server.ShouldRateLimit.response_time", 12, 1.0);
  f.timer(out, "t", 12.5, 1.0);
  f.timer(out, "t", 0.001234, 0.25);
  CHECK(out ==
        "ratelimit.service.rate_limit.d.k_v.total_hits:3|c\n"
        "ratelimit.redis_pool.cx_active:2|g\n"
        "g:-1|g\n"
        "ratelimit_server.ShouldRateLimit.response_time:12|ms\n"
        "t:12.500000|ms\n"
        "t:0.001234|ms|@0.25\n");
}

TEST_CASE("statsd lines: EXTRA_TAGS in the names of the ratelimit* stats") {
  statsd_format f(false, {{"app", "rate.limit"}, {"empty", ""}, {"zone", "eu:1|a"}}, {});
  std::string out;
  f.counter(out, "ratelimit.service.config_load_success", 1);
  f.timer(out, "ratelimit_server.ShouldRateLimit.response_time", 1, 1.0);
  f.counter(out, "runtime.load_success", 1);
  CHECK(out ==
        "ratelimit.service.config_load_success.__app=rate_limit.__zone=eu_1_a:1|c\n"
        "ratelimit_server.ShouldRateLimit.response_time.__app=rate_limit.__zone=eu_1_a:1|ms\n"
        "runtime.load_success:1|c\n");
  CHECK(statsd_tagged_name("ratelimit.x", {}) == "ratelimit.x");
}

TEST_CASE("DogStatsD lines: real tags, mogrifiers, whole milliseconds") {
  std::vector<mogrifier_settings> mogrifiers{{"TAG",
                                              R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$)",
                                              "ratelimit.service.rate_limit.$3",
                                              {{"descriptor", "$2"}, {"domain", "$1"}}}};
  statsd_format f(true, {{"app", "rl"}, {"zone", "eu.1"}}, mogrifiers);
  std::string out;
  f.counter(out, "ratelimit.service.rate_limit.mongo_cps.database_users.total_hits", 4);
  f.counter(out, "ratelimit.service.config_load_success", 1);
  f.gauge(out, "other.gauge", 7);
  f.timer(out, "ratelimit_server.ShouldRateLimit.response_time", 12.9, 0.5);
  CHECK(out ==
        "ratelimit.service.rate_limit.total_hits:4|c|#app:rl,zone:eu_1,descriptor:database_users,domain:"
        "mongo_cps\n"
        "ratelimit.service.config_load_success:1|c|#app:rl,zone:eu_1\n"
        "other.gauge:7|g\n"
        "ratelimit_server.ShouldRateLimit.response_time:12|ms|@0.5|#app:rl,zone:eu_1\n");
}

TEST_CASE("a line break in a stat name cannot start a line of its own") {
  statsd_format f(false, {}, {});
  std::string out;
  f.counter(out, "ratelimit.service.rate_limit.d.k_a\nfake_1000", 1);
  CHECK(out == "ratelimit.service.rate_limit.d.k_a_fake_1000:1|c\n");
}

TEST_CASE("split_lines packs whole lines into datagrams of at most 1432 bytes") {
  std::string lines;
  for (int i = 0; i < 100; ++i)
    lines += std::string(static_cast<std::size_t>(20 + i % 30), 'a' + i % 26) + ":1|c\n";
  auto chunks = split_lines(lines, 1432);
  CHECK(chunks.size() > 1);
  std::string joined;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    CHECK(chunks[i].size() <= 1432);
    CHECK(chunks[i].back() == '\n');
    // Full: the next line would not have fitted.
    if (i + 1 < chunks.size()) CHECK(chunks[i].size() + chunks[i + 1].find('\n') + 1 > 1432);
    joined += chunks[i];
  }
  CHECK(joined == lines);

  std::string big(2000, 'x');
  auto three = "a:1|c\n" + big + ":1|c\nb:1|c\n";
  auto alone = split_lines(three, 1432);
  REQUIRE(alone.size() == 3);
  CHECK(alone[0] == "a:1|c\n");
  CHECK(alone[1] == big + ":1|c\n");
  CHECK(alone[2] == "b:1|c\n");
  CHECK(split_lines("", 1432).empty());
}

TEST_CASE("Go's float formats") {
  std::string out;
  append_fixed(out, 1, 6);
  out += ' ';
  append_fixed(out, 1700000000.1234567, 6);
  out += ' ';
  append_shortest(out, 0.25);
  out += ' ';
  append_shortest(out, 0.0001);
  CHECK(out == "1.000000 1700000000.123457 0.25 0.0001");
}

TEST_CASE(
    "a stat's own tags (ratelimit.memcache.*): in the statsd name with the extra ones, real tags in "
    "DogStatsD") {
  const std::string name = "ratelimit.memcache.multiget.__code=success";
  CHECK(split_own_tags(name) ==
        std::pair<std::string, tag_list>{"ratelimit.memcache.multiget", {{"code", "success"}}});
  CHECK(split_own_tags("a.__x").first == "a.__x");  // no '=': not a tag
  CHECK(statsd_tagged_name(name, {}) == name);
  // gostats sorts a stat's tags and the extra ones together.
  CHECK(statsd_tagged_name(name, {{"app", "rl"}, {"zone", "eu"}}) ==
        "ratelimit.memcache.multiget.__app=rl.__code=success.__zone=eu");

  statsd_format dog(true, {{"app", "rl"}}, {});
  std::string out;
  dog.counter(out, name, 2);
  CHECK(out == "ratelimit.memcache.multiget:2|c|#code:success,app:rl\n");
}
