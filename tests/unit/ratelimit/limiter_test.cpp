#include <doctest/doctest.h>

#include "ratelimit/limiter/cache_key.hpp"
#include "ratelimit/limiter/local_cache.hpp"
#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

TEST_CASE("cache keys are upstream's, byte for byte") {
  std::string key;
  std::vector<config::entry> one{{"key", "value"}};
  limiter::build_cache_key(key, {"", "domain", one, {}}, 1234);
  CHECK(key == "domain_key_value_1234");
  limiter::build_cache_key(key, {"prefix:", "domain", one, {}}, 1234);
  CHECK(key == "prefix:domain_key_value_1234");
  std::vector<config::entry> two{{"key2", "value2"}, {"subkey2", "subvalue2"}};
  limiter::build_cache_key(key, {"", "domain", two, {}}, limiter::window_start(1234, 60));
  CHECK(key == "domain_key2_value2_subkey2_subvalue2_1200");
  std::vector<config::entry> files{{"files", "top/a.txt"}};
  std::vector<std::string_view> shared{"top/*"};
  limiter::build_cache_key(key, {"", "domain", files, shared}, 1234);
  CHECK(key == "domain_files_top/*_1234");
}

TEST_CASE("windows are epoch-aligned; the reset is 1..unit seconds away") {
  CHECK(limiter::window_start(1000000, 3600) == 997200);
  CHECK(limiter::seconds_until_reset(2222, 60) == 58);
  CHECK(limiter::seconds_until_reset(2220, 60) == 60);
  CHECK(config::unit_seconds(config::unit::week) == 604800);
  CHECK(config::unit_seconds(config::unit::month) == 2592000);
  CHECK(config::unit_seconds(config::unit::year) == 31536000);
}

TEST_CASE("the decision and near/over/within accounting follow upstream (limit 15, ratio 0.8 → near 12)") {
  service_fixture f(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 15}\n");
  auto req = make_request("d", {{{"k", "v"}}});
  const std::string p = "ratelimit.service.rate_limit.d.k.";
  for (int i = 1; i <= 15; ++i) {
    auto r = f.decide(req);
    CHECK(r.overall_code() == code::OK);
    CHECK(r.statuses(0).limit_remaining() == static_cast<std::uint32_t>(15 - i));
  }
  CHECK(f.counter(p + "within_limit") == 15);
  CHECK(f.counter(p + "near_limit") == 3);  // hits 13, 14, 15
  auto over = f.decide(req);
  CHECK(over.overall_code() == code::OVER_LIMIT);
  CHECK(over.statuses(0).code() == code::OVER_LIMIT);
  CHECK(over.statuses(0).limit_remaining() == 0);
  CHECK(over.statuses(0).current_limit().requests_per_unit() == 15);
  CHECK(over.statuses(0).current_limit().unit() == code::RateLimit::HOUR);
  CHECK(over.statuses(0).duration_until_reset().seconds() == 3600 - 1'000'000'020 % 3600);
  CHECK(f.counter(p + "over_limit") == 1);
  CHECK(f.counter(p + "total_hits") == 16);

  // A burst that crosses the limit splits its hits between near and over.
  service_fixture g(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 10}\n");
  auto burst = make_request("d", {{{"k", "v"}}}, 7);
  g.decide(burst);           // 7: within, no near (near = 8)
  auto r = g.decide(burst);  // 14: over by 4, near gets 10 - max(8, 7) = 2
  CHECK(r.statuses(0).code() == code::OVER_LIMIT);
  CHECK(g.counter(p + "over_limit") == 4);
  CHECK(g.counter(p + "near_limit") == 2);
  CHECK(g.counter(p + "within_limit") == 7);
}

TEST_CASE("requests_per_unit 0 blocks the first hit; a 0-hit check at the limit is OK with 0 remaining") {
  service_fixture f(R"(domain: d
descriptors:
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: two
    rate_limit: {unit: day, requests_per_unit: 2}
)");
  CHECK(f.decide(make_request("d", {{{"zero", "x"}}})).overall_code() == code::OVER_LIMIT);
  f.decide(make_request("d", {{{"two", "x"}}}, 2));
  auto check = make_request("d", {{{"two", "x"}}});
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  auto r = f.decide(check);
  CHECK(r.statuses(0).code() == code::OK);
  CHECK(r.statuses(0).limit_remaining() == 0);
  CHECK(f.decide(make_request("d", {{{"two", "x"}}})).overall_code() == code::OVER_LIMIT);
}

TEST_CASE("the local cache answers over-limit keys without the backend until the window ends") {
  limiter::settings ls;
  ls.local_cache_size_bytes = 1;  // raised to the minimum
  service_fixture f(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n", ls, {},
      1'000'000'020);
  auto req = make_request("d", {{{"k", "v"}}});
  f.decide(req);
  CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);  // counted by the backend: 2
  CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);  // from the local cache
  CHECK(f.counter("ratelimit.service.rate_limit.d.k.over_limit_with_local_cache") == 1);
  limiter::op_result stored;
  limiter::counter_op op;
  op.key = "d_k_v_1000000020";
  struct noop final : limiter::completion {
    void complete(const limiter::backend_error*) noexcept override {}
  } done;
  f.backend.get({&op, 1}, {&stored, 1}, done);
  CHECK(stored.value == 2);  // the third hit never reached the backend
  f.clock.advance(60);
  CHECK(f.decide(req).overall_code() == code::OK);
}

TEST_CASE("local cache: bounded by its byte budget, expired entries go first") {
  limiter::local_cache cache(limiter::local_cache::minimum_bytes);
  CHECK(cache.enabled());
  for (int i = 0; i < 100'000; ++i) cache.insert("key-" + std::to_string(i), 2000, 1000, 10);
  CHECK(cache.size() * limiter::local_cache::entry_overhead <= limiter::local_cache::minimum_bytes);
  CHECK(cache.contains("key-99999", 1000, 10));
  CHECK_FALSE(cache.contains("key-99999", 2000, 10));
  CHECK_FALSE(limiter::local_cache(0).enabled());
}

TEST_CASE("local cache: a key over a low limit does not refuse a higher limit (envoyproxy/ratelimit #1077)") {
  limiter::local_cache cache(limiter::local_cache::minimum_bytes);
  cache.insert("k", 2000, 1000, 10);
  CHECK(cache.contains("k", 1000, 10));
  CHECK(cache.contains("k", 1000, 5));
  CHECK_FALSE(cache.contains("k", 1000, 11));
  cache.insert("k", 2000, 1000, 50);  // over the higher limit too, since
  CHECK(cache.contains("k", 1000, 50));
}

TEST_CASE("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: other keys stop counting once one would exceed") {
  const char* yaml = R"(domain: d
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 10}
)";
  for (bool stop : {false, true}) {
    limiter::settings ls;
    ls.stop_cache_key_increment_when_overlimit = stop;
    service_fixture f(yaml, ls);
    auto req = make_request("d", {{{"key2", "v"}}, {{"key3", "v"}}});
    for (std::uint32_t i = 1; i <= 15; ++i) {
      auto r = f.decide(req);
      CAPTURE(stop);
      CAPTURE(i);
      if (i <= 10) {
        CHECK(r.overall_code() == code::OK);
        CHECK(r.statuses(0).limit_remaining() == 20 - i);
        CHECK(r.statuses(1).limit_remaining() == 10 - i);
      } else {
        CHECK(r.overall_code() == code::OVER_LIMIT);
        CHECK(r.statuses(1).code() == code::OVER_LIMIT);
        CHECK(r.statuses(0).code() == code::OK);
        CHECK(r.statuses(0).limit_remaining() == (stop ? 10u : 20 - i));
      }
    }
  }
}
