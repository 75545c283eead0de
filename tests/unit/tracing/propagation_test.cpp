#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "tracing/propagation.hpp"

using namespace sluice::tracing;

namespace {

const std::string trace = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string span = "00f067aa0ba902b7";

std::string hex(const auto& bytes) {
  std::string out;
  for (auto b : bytes) {
    out += "0123456789abcdef"[b >> 4];
    out += "0123456789abcdef"[b & 0xf];
  }
  return out;
}

header_lookup headers(std::map<std::string, std::string> h) {
  return [h = std::move(h)](std::string_view name) -> std::optional<std::string_view> {
    auto it = h.find(std::string(name));
    if (it == h.end()) return std::nullopt;
    return std::string_view(it->second);
  };
}

}  // namespace

TEST_CASE("W3C traceparent: the specification's example, flags, and what makes it invalid") {
  auto c = parse_traceparent("00-" + trace + "-" + span + "-01", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  REQUIRE(c);
  CHECK(hex(c->trace_id) == trace);
  CHECK(hex(c->span_id) == span);
  CHECK(c->sampled == true);
  CHECK(c->tracestate == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  CHECK(format_traceparent(*c) == "00-" + trace + "-" + span + "-01");
  CHECK(parse_traceparent("00-" + trace + "-" + span + "-00", "")->sampled == false);
  CHECK(parse_traceparent("00-" + trace + "-" + span + "-03", "")->sampled == true);  // other flags ignored
  // A later version may carry more fields; version 00 may not.
  CHECK(parse_traceparent("01-" + trace + "-" + span + "-01-what-comes-next", ""));
  for (const std::string& bad : std::vector<std::string>{
           "00-" + trace + "-" + span + "-01-extra",               // version 00 with more
           "ff-" + trace + "-" + span + "-01",                     // version ff
           "00-00000000000000000000000000000000-" + span + "-01",  // zero trace id
           "00-" + trace + "-0000000000000000-01",                 // zero span id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-" + span + "-01",  // upper case
           "00-" + trace + "-" + span + "-1",                      // short flags
           "00_" + trace + "_" + span + "_01",                     // separators
           "00-" + trace + "-" + span,                             // no flags
           "",
       }) {
    CHECK_FALSE_MESSAGE(parse_traceparent(bad, ""), bad);
  }
}

TEST_CASE("W3C tracestate: kept when every member is valid, dropped otherwise") {
  const std::string parent = "00-" + trace + "-" + span + "-01";
  CHECK(parse_traceparent(parent, "a=1, tenant@vendor=x y ,,b=2")->tracestate ==
        "a=1, tenant@vendor=x y ,,b=2");
  for (const std::string& bad :
       std::vector<std::string>{"A=1", "a=", "a=1,=2", "a=b=c", "1=1", "a@1=1", "a@=1"}) {
    CHECK_MESSAGE(parse_traceparent(parent, bad)->tracestate.empty(), bad);
  }
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  CHECK(parse_traceparent(parent, many)->tracestate.empty());  // more than 32 members
}

TEST_CASE("B3 single header: 128- and 64-bit trace ids, sampling states, a parent id") {
  auto c = parse_b3_single(trace + "-" + span + "-1-" + "05e3ac9a4f6e3b90");
  REQUIRE(c);
  CHECK(hex(c->trace_id) == trace);
  CHECK(c->sampled == true);
  c = parse_b3_single("a3ce929d0e0e4736-" + span);
  REQUIRE(c);
  CHECK(hex(c->trace_id) == "0000000000000000a3ce929d0e0e4736");
  CHECK_FALSE(c->sampled.has_value());  // deferred
  CHECK(parse_b3_single(trace + "-" + span + "-d")->sampled == true);
  CHECK(parse_b3_single(trace + "-" + span + "-0")->sampled == false);
  for (const std::string& bad : std::vector<std::string>{
           "0", "1", "d", trace + "-" + span + "-2", trace + "-" + span + "-1-00",
           trace + "-0000000000000000", "abc-" + span, trace + "-" + span + "-1-" + span + "-x"}) {
    CHECK_FALSE_MESSAGE(parse_b3_single(bad), bad);
  }
}

TEST_CASE("B3 multiple headers and the order of the propagators") {
  auto c = parse_b3_multi(trace, span, "1", "");
  REQUIRE(c);
  CHECK(c->sampled == true);
  CHECK(parse_b3_multi(trace, span, "true", "")->sampled == true);
  CHECK(parse_b3_multi(trace, span, "0", "")->sampled == false);
  CHECK(parse_b3_multi(trace, span, "0", "1")->sampled == true);  // debug
  CHECK_FALSE(parse_b3_multi(trace, span, "", "")->sampled.has_value());
  CHECK_FALSE(parse_b3_multi(trace, span, "yes", ""));
  CHECK_FALSE(parse_b3_multi(trace, "", "1", ""));

  const std::string other = "11111111111111111111111111111111";
  // W3C alone; B3 over W3C when both are valid; W3C when B3 is malformed; nothing from nothing.
  CHECK(hex(extract(headers({{"traceparent", "00-" + trace + "-" + span + "-01"}}))->trace_id) == trace);
  CHECK(hex(extract(headers({{"traceparent", "00-" + trace + "-" + span + "-01"},
                             {"b3", other + "-" + span + "-1"}}))
                ->trace_id) == other);
  CHECK(hex(extract(headers({{"traceparent", "00-" + trace + "-" + span + "-01"}, {"b3", "1"}}))->trace_id) ==
        trace);
  CHECK(hex(extract(headers({{"x-b3-traceid", other}, {"x-b3-spanid", span}, {"x-b3-sampled", "0"}}))
                ->trace_id) == other);
  CHECK_FALSE(extract(headers({})));
  CHECK_FALSE(extract(headers({{"traceparent", "garbage"}})));
}
