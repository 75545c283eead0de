#include <doctest/doctest.h>

#include <google/protobuf/struct.pb.h>

#include "rls.pb.h"
#include "tracing/proto_text.hpp"

using sluice::tracing::go_text;

TEST_CASE("strings are quoted with escapes; valid UTF-8 is kept") {
  envoy::service::ratelimit::v3::RateLimitRequest r;
  r.set_domain(std::string("a\"b\\c\n\x01\xff") + "é");
  CHECK(go_text(r) == "domain:\"a\\\"b\\\\c\\n\\x01\\xffé\"");
}

TEST_CASE("fields in the order the .proto declares them, as Go prints them: a limit's name first") {
  envoy::service::ratelimit::v3::RateLimitResponse r;
  auto* limit = r.add_statuses()->mutable_current_limit();
  limit->set_requests_per_unit(10);
  limit->set_name("per-user");
  CHECK(go_text(r) == "statuses:{current_limit:{name:\"per-user\" requests_per_unit:10}}");
}

TEST_CASE("a response: enums by name, map entries sorted by key") {
  envoy::service::ratelimit::v3::RateLimitResponse r;
  r.set_overall_code(envoy::service::ratelimit::v3::RateLimitResponse::OVER_LIMIT);
  auto* s = r.add_statuses();
  s->set_code(envoy::service::ratelimit::v3::RateLimitResponse::OK);
  s->set_limit_remaining(4);
  auto& fields = *r.mutable_dynamic_metadata()->mutable_fields();
  fields["zeta"].set_bool_value(true);
  fields["alpha"].set_number_value(1.5);
  CHECK(
      go_text(r) ==
      "overall_code:OVER_LIMIT statuses:{code:OK limit_remaining:4} dynamic_metadata:{fields:{key:\"alpha\" "
      "value:{number_value:1.5}} fields:{key:\"zeta\" value:{bool_value:true}}}");
}

TEST_CASE("numbers as Go's 'g' format prints them; map keys in Go's order (bytes, not quoted text)") {
  google::protobuf::Struct st;
  auto& f = *st.mutable_fields();
  f["a"].set_number_value(1234567);
  f["a b"].set_number_value(0.0001);
  f["a!"].set_number_value(0.00001);
  f["b"].set_number_value(123456);
  f["c"].set_number_value(-0.5);
  // By bytes "a" < "a b" < "a!"; by their quoted text "a!" would come first ('!' < '"').
  CHECK(
      go_text(st) ==
      "fields:{key:\"a\" value:{number_value:1.234567e+06}} fields:{key:\"a b\" value:{number_value:0.0001}} "
      "fields:{key:\"a!\" value:{number_value:1e-05}} fields:{key:\"b\" value:{number_value:123456}} "
      "fields:{key:\"c\" value:{number_value:-0.5}}");
}
