// A decision's request and a limit override as Go's String() prints them, written without reflection: the
// same text as tracing's reflective writer.

#include <doctest/doctest.h>

#include "ratelimit/service/request_text.hpp"
#include "tracing/proto_text.hpp"

namespace request_text_test {

using namespace sluice;
using ratelimit::service::go_text;

TEST_CASE("a request as Go's String() prints it: field order, nested messages, wrappers") {
  envoy::service::ratelimit::v3::RateLimitRequest r;
  r.set_domain("edge");
  auto* d = r.add_descriptors();
  auto* e = d->add_entries();
  e->set_key("remote_address");
  e->set_value("10.0.0.1");
  d->add_entries()->set_key("path");
  d->mutable_hits_addend()->set_value(3);
  d->mutable_limit()->set_requests_per_unit(5);
  d->mutable_limit()->set_unit(envoy::type::v3::RateLimitUnit::MINUTE);
  r.set_hits_addend(2);
  CHECK(go_text(r) ==
        "domain:\"edge\" descriptors:{entries:{key:\"remote_address\" value:\"10.0.0.1\"} "
        "entries:{key:\"path\"} "
        "limit:{requests_per_unit:5 unit:MINUTE} hits_addend:{value:3}} hits_addend:2");
  CHECK(go_text(envoy::service::ratelimit::v3::RateLimitRequest()).empty());
  // This writer and the reflective one (tracing/proto_text.hpp) agree.
  CHECK(go_text(r) == tracing::go_text(r));
  d->clear_hits_addend();
  d->mutable_hits_addend();  // present, zero: an empty message
  d->set_is_negative_hits(true);
  d->mutable_limit()->set_unit(static_cast<envoy::type::v3::RateLimitUnit>(42));
  CHECK(go_text(r) == tracing::go_text(r));
  CHECK(go_text(r).find("limit:{requests_per_unit:5 unit:42} hits_addend:{} is_negative_hits:true") !=
        std::string::npos);
  // A limit override alone (dynamic metadata's "limit"), as the reflective writer prints it.
  d->mutable_limit()->set_unit(envoy::type::v3::RateLimitUnit::HOUR);
  CHECK(go_text(d->limit()) == "requests_per_unit:5 unit:HOUR");
  CHECK(go_text(d->limit()) == tracing::go_text(d->limit()));
  d->mutable_limit()->set_requests_per_unit(0);
  CHECK(go_text(d->limit()) == "unit:HOUR");
}

}  // namespace request_text_test
