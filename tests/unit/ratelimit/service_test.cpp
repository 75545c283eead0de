#include <doctest/doctest.h>

#include "service_fixture.hpp"

using namespace sluice;
using namespace sluice::ratelimit;
using test::make_request;
using test::service_fixture;
using code = test::rls_response;

// Named: unity builds put several test files in one translation unit.
namespace service_test {

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
  ss.response_headers.limit = "X-Limit";
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

namespace {

const char* const quota_rules = R"(domain: q
descriptors:
  - key: quota_a
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, name: qa}
  - key: quota_b
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: normal
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
)";

}  // namespace

TEST_CASE("quota mode: a quota descriptor over its limit shows it, the request is over only when all are") {
  service_fixture f(quota_rules);
  f.decide(make_request("q", {{{"quota_a", "1"}}}));
  // quota_a is over, quota_b is not: OK overall, with quota_a's own status OVER_LIMIT.
  auto r = f.decide(make_request("q", {{{"quota_a", "1"}}, {{"quota_b", "1"}}, {{"free", "1"}}}));
  CHECK(r.overall_code() == code::OK);
  CHECK(r.statuses(0).code() == code::OVER_LIMIT);
  CHECK(r.statuses(0).current_limit().name() == "qa");
  CHECK(r.statuses(1).code() == code::OK);
  // Both quota descriptors over: over limit (the unlimited one counts on neither side).
  f.decide(make_request("q", {{{"quota_b", "1"}}}));
  CHECK(
      f.decide(make_request("q", {{{"quota_a", "1"}}, {{"quota_b", "1"}}, {{"free", "1"}}})).overall_code() ==
      code::OVER_LIMIT);
  // A normal descriptor over is over, whatever the quota descriptors say.
  f.decide(make_request("q", {{{"normal", "1"}}}));
  CHECK(f.decide(make_request("q", {{{"normal", "1"}}, {{"quota_a", "2"}}})).overall_code() ==
        code::OVER_LIMIT);
  // Only unlimited descriptors: OK.
  CHECK(f.decide(make_request("q", {{{"free", "1"}}})).overall_code() == code::OK);
}

TEST_CASE("QUOTA_MODE: every descriptor is a quota descriptor, and one without a limit is never over") {
  service::settings ss;
  ss.global_quota_mode = true;
  ss.response_headers_enabled = true;
  service_fixture f(rules, {}, ss);
  f.decide(make_request("d", {{{"c", "1"}}}, 3));
  auto r = f.decide(make_request("d", {{{"c", "1"}}, {{"listed", "1"}}}));
  CHECK(r.statuses(0).code() == code::OVER_LIMIT);
  CHECK(r.overall_code() == code::OK);  // `listed` has no limit: a quota descriptor never over
  // A quota descriptor over its limit does not take the RateLimit-* headers by force; the tightest still
  // does.
  CHECK(r.response_headers_to_add(1).value() == "0");
  CHECK(f.decide(make_request("d", {{{"c", "1"}}})).overall_code() == code::OVER_LIMIT);
}

TEST_CASE("LIMIT_REQUEST_HEADERS_ENABLED: the figures of the response headers, for the upstream service") {
  service::settings ss;
  ss.request_headers_enabled = true;
  ss.request_headers.remaining = "X-Quota-Remaining";
  service_fixture f(rules, {}, ss, 2222);
  auto r = f.decide(make_request("d", {{{"a", "1"}}, {{"c", "1"}}}));
  CHECK(r.response_headers_to_add_size() == 0);
  REQUIRE(r.request_headers_to_add_size() == 3);
  CHECK(r.request_headers_to_add(0).key() == "RateLimit-Limit");
  CHECK(r.request_headers_to_add(0).value() == "3");
  CHECK(r.request_headers_to_add(1).key() == "X-Quota-Remaining");
  CHECK(r.request_headers_to_add(1).value() == "2");
  CHECK(r.request_headers_to_add(2).key() == "RateLimit-Reset");
  CHECK(r.request_headers_to_add(2).value() == "58");

  ss.response_headers_enabled = true;
  service_fixture both(rules, {}, ss, 2222);
  auto b = both.decide(make_request("d", {{{"a", "1"}}}));
  CHECK(b.response_headers_to_add_size() == 3);
  CHECK(b.request_headers_to_add_size() == 3);
  CHECK(b.request_headers_to_add(1).value() == "4");
}

TEST_CASE("negative hits give back what was consumed, never below 0, and are counted") {
  service_fixture f(rules);
  f.decide(make_request("d", {{{"c", "1"}}}, 3));
  CHECK(f.decide(make_request("d", {{{"c", "1"}}})).overall_code() == code::OVER_LIMIT);  // the counter is 4
  auto refund = make_request("d", {{{"c", "1"}}}, 3);
  refund.mutable_descriptors(0)->set_is_negative_hits(true);
  auto r = f.decide(refund);
  CHECK(r.overall_code() == code::OK);
  CHECK(r.statuses(0).code() == code::OK);
  CHECK(r.statuses(0).current_limit().requests_per_unit() == 3);
  CHECK(r.statuses(0).duration_until_reset().seconds() > 0);
  CHECK(r.statuses(0).limit_remaining() == 2);  // 4 - 3 = 1 used
  CHECK(f.counter("ratelimit.service.rate_limit.d.c.total_negative_hits") == 3);
  CHECK(f.counter("ratelimit.service.rate_limit.d.c.total_hits") == 4);
  CHECK(f.decide(make_request("d", {{{"c", "1"}}})).statuses(0).limit_remaining() == 1);
  // More than was consumed: the counter stops at 0.
  refund.mutable_descriptors(0)->mutable_hits_addend()->set_value(100);
  CHECK(f.decide(refund).statuses(0).limit_remaining() == 3);
  CHECK(f.decide(make_request("d", {{{"c", "1"}}})).statuses(0).limit_remaining() == 2);
  // Nothing to give back to a counter that does not exist: none is made.
  const auto before = f.backend.size();
  auto fresh = make_request("d", {{{"c", "never"}}});
  fresh.mutable_descriptors(0)->set_is_negative_hits(true);
  CHECK(f.decide(fresh).statuses(0).limit_remaining() == 3);
  CHECK(f.backend.size() == before);
}

TEST_CASE("negative hits clear a key from the local over-limit cache once it is under its limit again") {
  limiter::settings ls;
  ls.local_cache_size_bytes = 1 << 20;
  service_fixture f(rules, ls);
  f.decide(make_request("d", {{{"c", "1"}}}, 4));
  f.decide(make_request("d", {{{"c", "1"}}}));  // over: the key is now in the local cache
  CHECK(f.counter("ratelimit.service.rate_limit.d.c.over_limit_with_local_cache") == 1);
  auto refund = make_request("d", {{{"c", "1"}}}, 3);
  refund.mutable_descriptors(0)->set_is_negative_hits(true);
  CHECK(f.decide(refund).statuses(0).limit_remaining() == 2);  // 4 - 3 = 1 (the cached hit was not counted)
  auto after = f.decide(make_request("d", {{{"c", "1"}}}));
  CHECK(after.overall_code() == code::OK);
  CHECK(after.statuses(0).limit_remaining() == 1);
}

TEST_CASE("negative hits are kept in STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT mode") {
  limiter::settings ls;
  ls.stop_cache_key_increment_when_overlimit = true;
  service_fixture f(rules, ls);
  f.decide(make_request("d", {{{"c", "1"}}}, 2));
  auto mixed = make_request("d", {{{"c", "1"}}, {{"a", "1"}}}, 5);
  mixed.mutable_descriptors(0)->set_is_negative_hits(true);
  mixed.mutable_descriptors(0)->mutable_hits_addend()->set_value(1);
  auto r = f.decide(mixed);  // nothing would exceed (`a` reaches exactly 5): both counted
  CHECK(r.statuses(0).limit_remaining() == 2);
  auto again = f.decide(mixed);  // `a` would now exceed: only it is counted, and the refund still happens
  CHECK(again.statuses(1).code() == code::OVER_LIMIT);
  CHECK(again.statuses(0).limit_remaining() == 3);
}

TEST_CASE("RESPONSE_DYNAMIC_METADATA: the request, and the merged metadata of the descriptors that passed") {
  const char* const meta_rules = R"(domain: m
descriptors:
  - key: first
    metadata: {team: payments, nested: {a: 1, keep: x}, list: [1, two, true, null]}
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: second
    metadata: {team: ignored, nested: {a: 2, b: 3.5}, extra: yes}
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: blocked
    metadata: {blocked: true}
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: free
    metadata: {free: true}
    rate_limit: {unlimited: true}
)";
  service::settings ss;
  ss.response_dynamic_metadata = true;
  service_fixture f(meta_rules, {}, ss);
  auto req = make_request("m", {{{"first", "1"}}, {{"second", "2"}}, {{"blocked", "3"}}, {{"free", "4"}}}, 2);
  req.mutable_descriptors(1)->mutable_hits_addend()->set_value(0);
  auto* limit = req.mutable_descriptors(2)->mutable_limit();
  limit->set_requests_per_unit(0);
  limit->set_unit(envoy::type::v3::MINUTE);
  auto r = f.decide(req);
  const auto& fields = r.dynamic_metadata().fields();
  CHECK(fields.at("domain").string_value() == "m");
  CHECK(fields.at("hitsAddend").number_value() == 2);
  const auto& descriptors = fields.at("descriptors").list_value().values();
  REQUIRE(descriptors.size() == 4);
  CHECK(descriptors[0].struct_value().fields().at("entries").list_value().values(0).string_value() ==
        "first=1");
  CHECK(descriptors[1].struct_value().fields().at("hitsAddend").number_value() == 0);
  CHECK(descriptors[2].struct_value().fields().at("limit").string_value() == "unit:MINUTE");
  const auto& metadata = fields.at("metadata").struct_value().fields();
  CHECK(metadata.at("team").string_value() == "payments");  // the first value of a key wins
  CHECK(metadata.at("extra").bool_value());
  CHECK(metadata.at("free").bool_value());    // unlimited rules pass too (upstream skips them)
  CHECK_FALSE(metadata.contains("blocked"));  // over limit: not merged (the override replaced its rule)
  const auto& nested = metadata.at("nested").struct_value().fields();
  CHECK(nested.at("a").number_value() == 1);
  CHECK(nested.at("b").number_value() == 3.5);  // nested objects merge; kept with detailed_metric
  CHECK(metadata.at("list").list_value().values_size() == 4);

  // Over limit: that descriptor's metadata is left out.
  auto blocked = f.decide(make_request("m", {{{"blocked", "x"}}}));
  CHECK(blocked.overall_code() == code::OVER_LIMIT);
  CHECK_FALSE(blocked.dynamic_metadata().fields().contains("metadata"));
  CHECK_FALSE(blocked.dynamic_metadata().fields().contains("hitsAddend"));

  // The rules' own metadata is untouched by the merges.
  auto only_second = f.decide(make_request("m", {{{"second", "2"}}}));
  CHECK(only_second.dynamic_metadata()
            .fields()
            .at("metadata")
            .struct_value()
            .fields()
            .at("team")
            .string_value() == "ignored");

  service_fixture off(meta_rules);
  CHECK_FALSE(off.decide(req).has_dynamic_metadata());
}

TEST_CASE("top descriptors: each counted descriptor's hits; its over-limit answers, not shadow mode's") {
  service_fixture f(rules);
  stats::top_recorder top(64);
  f.service.set_top_recorder(&top);
  for (int i = 0; i < 5; ++i) f.decide(make_request("d", {{{"c", "x"}}}));  // limit 3: two over
  f.decide(make_request("d", {{{"c", "y"}}}, 4));                           // hits_addend 4, over at once
  for (int i = 0; i < 3; ++i) f.decide(make_request("d", {{{"shadow", "s"}}}));        // over, in shadow mode
  f.decide(make_request("d", {{{"free", "x"}}, {{"listed", "x"}}, {{"nope", "x"}}}));  // nothing counted
  f.decide(make_request("nope", {{{"c", "x"}}}));                                      // unknown domain
  auto negative = make_request("d", {{{"c", "z"}}});
  negative.mutable_descriptors(0)->set_is_negative_hits(true);
  f.decide(negative);  // hits given back are not hits
  auto override_request = make_request("d", {{{"a", "o"}}});
  override_request.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(1);
  override_request.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::HOUR);
  f.decide(override_request);
  auto peek = make_request("d", {{{"c", "peek"}}});
  peek.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  f.decide(peek);  // a peek takes no hits: not a hit

  const std::int64_t now = f.clock.now_seconds();
  const stats::top_recorder* recorders[] = {&top};
  const auto lists = stats::merge_top(recorders, 10, now);
  auto describe = [](const std::vector<stats::top_entry>& list) {
    std::vector<std::string> out;
    for (const auto& e : list) {
      std::string line = e.domain + " " + e.rule;
      for (const auto& kv : e.entries) line += " " + kv;
      out.push_back(line + " " + std::to_string(e.count));
    }
    return out;
  };
  CHECK(describe(lists.hits) ==
        std::vector<std::string>{"d c c=x 5", "d c c=y 4", "d shadow shadow=s 3", "d (override) a=o 1"});
  CHECK(describe(lists.over_limit) == std::vector<std::string>{"d c c=x 2", "d c c=y 1"});
}

TEST_CASE("top descriptors: TOP_DESCRIPTORS_VALUES=hash shows each value's hash, never the value") {
  service_fixture f(rules);
  stats::top_recorder top(64, true);
  f.service.set_top_recorder(&top);
  for (int i = 0; i < 2; ++i) f.decide(make_request("d", {{{"c", "secret-1"}}}));
  f.decide(make_request("d", {{{"c", "secret-2"}}}));
  const std::int64_t now = f.clock.now_seconds();
  const stats::top_recorder* recorders[] = {&top};
  const auto lists = stats::merge_top(recorders, 10, now);
  REQUIRE(lists.hits.size() == 2);
  CHECK(lists.hits[0].count == 2);
  CHECK(lists.hits[0].rule == "c");
  for (const auto& e : lists.hits) {
    REQUIRE(e.entries.size() == 1);
    CHECK(e.entries[0].starts_with("c=#"));
    CHECK(e.entries[0].find("secret") == std::string::npos);
  }
  CHECK(lists.hits[0].entries != lists.hits[1].entries);
}

TEST_CASE("top descriptors: a descriptor shows at most eight entries; the rest are one '…'") {
  service_fixture f(R"(domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 5}
)");
  stats::top_recorder top(64);
  f.service.set_top_recorder(&top);
  auto request = make_request("d", {{}});
  for (int i = 0; i < 12; ++i) {
    auto* e = request.mutable_descriptors(0)->add_entries();
    e->set_key("k");
    e->set_value(std::to_string(i));
  }
  auto decision = f.decide(request);  // no rule 12 levels deep: an override makes it counted
  request.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(3);
  request.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::HOUR);
  f.decide(request);
  const stats::top_recorder* recorders[] = {&top};
  const auto lists = stats::merge_top(recorders, 10, f.clock.now_seconds());
  REQUIRE(lists.hits.size() == 1);
  CHECK(lists.hits[0].rule == "(override)");
  CHECK(lists.hits[0].entries ==
        std::vector<std::string>{"k=0", "k=1", "k=2", "k=3", "k=4", "k=5", "k=6", "k=7", "\u2026"});
}

}  // namespace service_test
