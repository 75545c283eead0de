#include <doctest/doctest.h>

#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

namespace {

const char* const rules = R"(domain: d
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 5, name: small}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 50, replaces: [{name: small}]}
  - key: free
    rate_limit: {unlimited: true}
  - key: listed
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: c
    rate_limit: {unit: minute, requests_per_unit: 3}
)";

}  // namespace

TEST_CASE("bad requests are refused with specific messages") {
  service_fixture f(rules);
  CHECK(f.try_decide(make_request("", {{{"a", "1"}}})).second == "rate limit domain must not be empty");
  CHECK(f.try_decide(make_request("d", {})).second == "rate limit descriptor list must not be empty");
  CHECK(f.try_decide(make_request("d", {{{"a", "1"}}, {{"a", "1"}, {"", "x"}}})).second ==
        "descriptors[1].entries[1]: key must not be empty");
  auto bad_override = make_request("d", {{{"a", "1"}}});
  bad_override.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(3);
  CHECK(f.try_decide(bad_override).second->starts_with("descriptors[0].limit.unit: "));
  CHECK(f.counter("ratelimit.service.call.should_rate_limit.service_error") == 4);

  service_fixture empty("");
  CHECK(empty.try_decide(make_request("d", {{{"a", "1"}}})).second == "no rate limit configuration loaded");
}

TEST_CASE("unknown domain, allow-listed and unlimited descriptors") {
  service_fixture f(rules);
  auto unknown = f.decide(make_request("nope", {{{"a", "1"}}, {{"b", "2"}}}));
  CHECK(unknown.overall_code() == code::OK);
  REQUIRE(unknown.statuses_size() == 2);
  CHECK_FALSE(unknown.statuses(0).has_current_limit());
  CHECK(f.counter("ratelimit.service.rate_limit.nope.domain_not_found") == 2);

  auto r = f.decide(make_request("d", {{{"listed", "x"}}, {{"free", "x"}}}));
  CHECK(r.statuses(0).code() == code::OK);
  CHECK_FALSE(r.statuses(0).has_current_limit());
  CHECK(r.statuses(0).limit_remaining() == 0);
  CHECK(r.statuses(1).code() == code::OK);
  CHECK_FALSE(r.statuses(1).has_current_limit());
  CHECK(r.statuses(1).limit_remaining() == 4294967295u);
  CHECK(f.backend.size() == 0);  // neither touched the counters
}

TEST_CASE("replaces: the named limit is neither enforced nor counted when the replacing one matches") {
  service_fixture f(rules);
  for (int i = 0; i < 6; ++i) {
    auto r = f.decide(make_request("d", {{{"a", "1"}}, {{"b", "1"}}}));
    CHECK(r.overall_code() == code::OK);
    CHECK_FALSE(r.statuses(0).has_current_limit());
    CHECK(r.statuses(1).limit_remaining() == static_cast<std::uint32_t>(49 - i));
  }
  CHECK(f.counter("ratelimit.service.rate_limit.d.a.total_hits") == 0);
  // Alone, `a` is enforced.
  auto alone = f.decide(make_request("d", {{{"a", "1"}}}));
  CHECK(alone.statuses(0).current_limit().name() == "small");
  CHECK(alone.statuses(0).limit_remaining() == 4);
}

TEST_CASE("shadow mode per rule and globally") {
  service_fixture f(rules);
  f.decide(make_request("d", {{{"shadow", "x"}}}));
  auto r = f.decide(make_request("d", {{{"shadow", "x"}}}));
  CHECK(r.overall_code() == code::OK);
  CHECK(r.statuses(0).code() == code::OK);
  CHECK(r.statuses(0).has_current_limit());
  CHECK(r.statuses(0).limit_remaining() == 0);
  CHECK(f.counter("ratelimit.service.rate_limit.d.shadow.shadow_mode") == 1);
  CHECK(f.counter("ratelimit.service.rate_limit.d.shadow.over_limit") == 1);

  service::settings ss;
  ss.global_shadow_mode = true;
  service_fixture g(rules, {}, ss);
  auto req = make_request("d", {{{"c", "x"}}}, 4);
  auto over = g.decide(req);
  CHECK(over.overall_code() == code::OK);
  CHECK(over.statuses(0).code() == code::OVER_LIMIT);
  CHECK(g.counter("ratelimit.service.global_shadow_mode") == 1);
}

TEST_CASE("limit overrides replace the rule and key on the request's values") {
  service_fixture f(rules);
  auto req = make_request("d", {{{"a", "1"}, {"extra", "z"}}});
  auto* limit = req.mutable_descriptors(0)->mutable_limit();
  limit->set_requests_per_unit(2);
  limit->set_unit(envoy::type::v3::DAY);
  auto r = f.decide(req);
  CHECK(r.statuses(0).current_limit().requests_per_unit() == 2);
  CHECK(r.statuses(0).current_limit().unit() == code::RateLimit::DAY);
  CHECK(r.statuses(0).limit_remaining() == 1);
  f.decide(req);
  CHECK(f.decide(req).overall_code() == code::OVER_LIMIT);
  CHECK(f.counter("ratelimit.service.rate_limit.d.a_1.extra_z.total_hits") == 3);
  // Unknown domains ignore overrides, as upstream.
  req.set_domain("nope");
  CHECK_FALSE(f.decide(req).statuses(0).has_current_limit());
}

TEST_CASE("hits_addend: request level (0 means 1) and the per-descriptor wrapper (0 checks only)") {
  service_fixture f(rules);
  CHECK(f.decide(make_request("d", {{{"a", "1"}}}, 0)).statuses(0).limit_remaining() == 4);
  CHECK(f.decide(make_request("d", {{{"a", "1"}}}, 2)).statuses(0).limit_remaining() == 2);
  auto wrapper = make_request("d", {{{"a", "1"}}, {{"c", "1"}}}, 2);
  wrapper.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  auto r = f.decide(wrapper);
  CHECK(r.statuses(0).limit_remaining() == 2);  // checked, not consumed
  CHECK(r.statuses(1).limit_remaining() == 1);  // the request-level 2 applies
}

TEST_CASE("RateLimit-* headers describe the tightest limit, or the last one over limit") {
  service::settings ss;
  ss.response_headers_enabled = true;
  ss.limit_header = "X-Limit";
  service_fixture f(rules, {}, ss, 2222);
  auto r = f.decide(make_request("d", {{{"a", "1"}}, {{"c", "1"}}}));
  REQUIRE(r.response_headers_to_add_size() == 3);
  CHECK(r.response_headers_to_add(0).key() == "X-Limit");
  CHECK(r.response_headers_to_add(0).value() == "3");
  CHECK(r.response_headers_to_add(1).key() == "RateLimit-Remaining");
  CHECK(r.response_headers_to_add(1).value() == "2");
  CHECK(r.response_headers_to_add(2).key() == "RateLimit-Reset");
  CHECK(r.response_headers_to_add(2).value() == "58");

  auto over = f.decide(make_request("d", {{{"c", "1"}}, {{"a", "1"}}}, 3));
  CHECK(over.statuses(0).code() == code::OVER_LIMIT);
  CHECK(over.response_headers_to_add(0).value() == "3");
  CHECK(over.response_headers_to_add(1).value() == "0");

  auto none = f.decide(make_request("d", {{{"listed", "1"}}}));
  CHECK(none.response_headers_to_add_size() == 0);
}
