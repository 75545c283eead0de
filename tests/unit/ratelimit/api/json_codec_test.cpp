#include "ratelimit/api/json_codec.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>

#include <string>

namespace api = sluice::ratelimit::api;

namespace {

using api::rls_request;
using api::rls_response;
using envoy::type::v3::RateLimitUnit;

rls_request parse_ok(std::string_view body) {
  rls_request request;
  const auto error = api::parse_request_json(body, request);
  INFO("body: " << body);
  CHECK_MESSAGE(!error, (error ? *error : std::string()));
  return request;
}

std::string parse_error(std::string_view body) {
  rls_request request;
  const auto error = api::parse_request_json(body, request);
  INFO("body: " << body);
  REQUIRE(error);
  return *error;
}

}  // namespace

TEST_CASE("parse: original field names") {
  const auto r = parse_ok(
      R"({"domain":"edge","hits_addend":3,"descriptors":[{"entries":[{"key":"k","value":"v"},{"key":"k2","value":""}],)"
      R"("limit":{"requests_per_unit":10,"unit":"MINUTE"},"hits_addend":7}]})");
  CHECK(r.domain() == "edge");
  CHECK(r.hits_addend() == 3);
  REQUIRE(r.descriptors_size() == 1);
  const auto& d = r.descriptors(0);
  REQUIRE(d.entries_size() == 2);
  CHECK(d.entries(0).key() == "k");
  CHECK(d.entries(0).value() == "v");
  CHECK(d.entries(1).key() == "k2");
  CHECK(d.entries(1).value() == "");
  REQUIRE(d.has_limit());
  CHECK(d.limit().requests_per_unit() == 10);
  CHECK(d.limit().unit() == RateLimitUnit::MINUTE);
  REQUIRE(d.has_hits_addend());
  CHECK(d.hits_addend().value() == 7);
}

TEST_CASE("parse: lowerCamelCase field names") {
  const auto r = parse_ok(
      R"({"domain":"d","hitsAddend":4,"descriptors":[{"entries":[],"limit":{"requestsPerUnit":5,"unit":"HOUR"},)"
      R"("hitsAddend":9},{}]})");
  CHECK(r.hits_addend() == 4);
  REQUIRE(r.descriptors_size() == 2);
  CHECK(r.descriptors(0).entries_size() == 0);
  CHECK(r.descriptors(0).limit().requests_per_unit() == 5);
  CHECK(r.descriptors(0).limit().unit() == RateLimitUnit::HOUR);
  CHECK(r.descriptors(0).hits_addend().value() == 9);
  CHECK_FALSE(r.descriptors(1).has_limit());
  CHECK_FALSE(r.descriptors(1).has_hits_addend());
}

TEST_CASE("parse: enum by name or number") {
  auto unit_of = [](std::string_view unit) {
    const auto r = parse_ok(R"({"descriptors":[{"limit":{"unit":)" + std::string(unit) + "}}]}");
    return static_cast<int>(r.descriptors(0).limit().unit());
  };
  CHECK(unit_of(R"("SECOND")") == 1);
  CHECK(unit_of(R"("YEAR")") == 6);
  CHECK(unit_of(R"("UNKNOWN")") == 0);
  CHECK(unit_of("4") == RateLimitUnit::DAY);
  CHECK(unit_of("2.0") == RateLimitUnit::MINUTE);
  CHECK(unit_of("9") == 9);  // open enum: unknown numbers are kept, as protojson does
  CHECK(unit_of("-1") == -1);
  CHECK(parse_error(R"({"descriptors":[{"limit":{"unit":"minute"}}]})") ==
        "descriptors[0].limit.unit: unknown unit 'minute'");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"unit":"2"}}]})") ==
        "descriptors[0].limit.unit: unknown unit '2'");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"unit":2147483648}}]})") ==
        "descriptors[0].limit.unit: expected a unit name or a 32-bit integer");
}

TEST_CASE("parse: integers as numbers or decimal strings") {
  auto hits = [](std::string_view v) {
    const auto r = parse_ok(R"({"descriptors":[{"hits_addend":)" + std::string(v) + "}]}");
    return r.descriptors(0).hits_addend().value();
  };
  CHECK(hits(R"("18446744073709551615")") == 18446744073709551615ull);
  CHECK(hits("18446744073709551615") == 18446744073709551615ull);
  CHECK(hits(R"("12")") == 12);
  CHECK(hits("1e2") == 100);
  CHECK(hits("1.50e1") == 15);
  CHECK(hits("100e-2") == 1);
  CHECK(hits(R"("2.0")") == 2);
  CHECK(hits("-0") == 0);
  CHECK(hits(R"("0e99999999999")") == 0);  // protojson takes any zero before looking at the exponent
  CHECK(hits("1e19") == 10000000000000000000ull);

  CHECK(parse_ok(R"({"hits_addend":"4294967295"})").hits_addend() == 4294967295u);
  CHECK(parse_ok(R"({"descriptors":[{"limit":{"requests_per_unit":"25"}}]})")
            .descriptors(0)
            .limit()
            .requests_per_unit() == 25);

  const std::string u64 = "descriptors[0].hits_addend: expected an unsigned 64-bit integer";
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":"18446744073709551616"}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":1.5}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":-1}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":" 1"}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":1e20}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":"1e99999999999"}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":10e-2}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":"01"}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":""}]})") == u64);
  CHECK(parse_error(R"({"descriptors":[{"hits_addend":{"value":1}}]})") == u64);
  const std::string u32 = "hits_addend: expected an unsigned 32-bit integer";
  CHECK(parse_error(R"({"hits_addend":4294967296})") == u32);
  CHECK(parse_error(R"({"hits_addend":"abc"})") == u32);
  CHECK(parse_error(R"({"hits_addend":true})") == u32);
  CHECK(parse_error(R"({"hitsAddend":-3})") == "hitsAddend: expected an unsigned 32-bit integer");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"requestsPerUnit":"x"}}]})") ==
        "descriptors[0].limit.requestsPerUnit: expected an unsigned 32-bit integer");
}

TEST_CASE("parse: null means not set") {
  const auto r = parse_ok(R"({"domain":null,"descriptors":null,"hits_addend":null})");
  CHECK(r.domain().empty());
  CHECK(r.descriptors_size() == 0);
  CHECK(r.hits_addend() == 0);

  const auto d =
      parse_ok(R"({"descriptors":[{"entries":null,"limit":null,"hits_addend":null}]})").descriptors(0);
  CHECK(d.entries_size() == 0);
  CHECK_FALSE(d.has_limit());
  CHECK_FALSE(d.has_hits_addend());

  const auto e =
      parse_ok(R"({"descriptors":[{"entries":[{"key":null,"value":null}],"limit":{"unit":null}}]})");
  CHECK(e.descriptors(0).entries(0).key().empty());
  CHECK(e.descriptors(0).limit().unit() == RateLimitUnit::UNKNOWN);

  // An array element is a message: null is not one.
  CHECK(parse_error(R"({"descriptors":[null]})") == "descriptors[0]: expected an object");
  CHECK(parse_error(R"({"descriptors":[{"entries":[{},null]}]})") ==
        "descriptors[0].entries[1]: expected an object");
  CHECK(parse_error("null") == "request body must be a JSON object");
}

TEST_CASE("parse: hits_addend wrapper presence") {
  const auto r = parse_ok(R"({"descriptors":[{"hits_addend":0},{"hitsAddend":"0"},{}]})");
  REQUIRE(r.descriptors_size() == 3);
  CHECK(r.descriptors(0).has_hits_addend());
  CHECK(r.descriptors(0).hits_addend().value() == 0);
  CHECK(r.descriptors(1).has_hits_addend());
  CHECK_FALSE(r.descriptors(2).has_hits_addend());
  CHECK(parse_ok(R"({"descriptors":[{"limit":{}}]})").descriptors(0).has_limit());
}

TEST_CASE("parse: escaped strings and keys") {
  const auto r = parse_ok(
      R"({"do\u006dain":"a\"b\\c\u00e9","descriptors":[{"entries":[{"key":"\n","value":"x\ty"}]}]})");
  CHECK(r.domain() == "a\"b\\c\xc3\xa9");
  CHECK(r.descriptors(0).entries(0).key() == "\n");
  CHECK(r.descriptors(0).entries(0).value() == "x\ty");

  // Long escaped strings reach the handler in several parts.
  std::string value;
  std::string json;
  for (int i = 0; i < 3000; ++i) {
    value += "ab\"";
    json += R"(ab\")";
  }
  const auto long_value = parse_ok(R"({"descriptors":[{"entries":[{"key":"k","value":")" + json + "\"}]}]}");
  CHECK(long_value.descriptors(0).entries(0).value() == value);
  CHECK(parse_ok(R"({"hits_addend":"\u0031\u0032"})").hits_addend() == 12);
}

TEST_CASE("parse: reuses the output message") {
  rls_request request;
  REQUIRE_FALSE(api::parse_request_json(R"({"domain":"a","hits_addend":2,"descriptors":[{}]})", request));
  REQUIRE_FALSE(api::parse_request_json(R"({"domain":"b"})", request));
  CHECK(request.domain() == "b");
  CHECK(request.hits_addend() == 0);
  CHECK(request.descriptors_size() == 0);
}

TEST_CASE("parse: error messages") {
  CHECK(parse_error("") == "request body is empty");
  CHECK(parse_error("{\"domain\":") == "invalid JSON: incomplete JSON");
  CHECK(parse_error("{\"domain\":\"a\",}") == "invalid JSON: syntax error");
  CHECK(parse_error("{} x") == "invalid JSON: extra data");
  CHECK(parse_error("[]") == "request body must be a JSON object");
  CHECK(parse_error("\"x\"") == "request body must be a JSON object");
  CHECK(parse_error("5") == "request body must be a JSON object");
  CHECK(parse_error(R"({"foo":1})") == "unknown field 'foo'");
  CHECK(parse_error(R"({"descriptors":[{"foo":1}]})") == "descriptors[0]: unknown field 'foo'");
  CHECK(parse_error(R"({"descriptors":[{},{"entries":[{"kye":"a"}]}]})") ==
        "descriptors[1].entries[0]: unknown field 'kye'");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"per":1}}]})") ==
        "descriptors[0].limit: unknown field 'per'");
  CHECK(parse_error(R"({"Domain":"a"})") == "unknown field 'Domain'");
  CHECK(parse_error(R"({"domain":1})") == "domain: expected a string");
  CHECK(parse_error(R"({"domain":["a"]})") == "domain: expected a string");
  CHECK(parse_error(R"({"descriptors":{}})") == "descriptors: expected an array");
  CHECK(parse_error(R"({"descriptors":[[]]})") == "descriptors[0]: expected an object");
  CHECK(parse_error(R"({"descriptors":[{"entries":{}}]})") == "descriptors[0].entries: expected an array");
  CHECK(parse_error(R"({"descriptors":[{"entries":["a"]}]})") ==
        "descriptors[0].entries[0]: expected an object");
  CHECK(parse_error(R"({"descriptors":[{"entries":[{"key":"k","value":5}]}]})") ==
        "descriptors[0].entries[0].value: expected a string");
  CHECK(parse_error(R"({"descriptors":[{"limit":[]}]})") == "descriptors[0].limit: expected an object");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"unit":"FORTNIGHT"}}]})") ==
        "descriptors[0].limit.unit: unknown unit 'FORTNIGHT'");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"unit":true}}]})") ==
        "descriptors[0].limit.unit: expected a unit name or a 32-bit integer");
  // The first problem in document order wins, as with protojson's streaming decoder.
  CHECK(parse_error(R"({"foo":1,"domain":)") == "unknown field 'foo'");
}

TEST_CASE("parse: duplicate fields") {
  CHECK(parse_error(R"({"hits_addend":1,"hitsAddend":2})") == "duplicate field 'hitsAddend'");
  CHECK(parse_error(R"({"domain":"a","domain":"b"})") == "duplicate field 'domain'");
  CHECK(parse_error(R"({"domain":null,"domain":"b"})") == "duplicate field 'domain'");
  CHECK(parse_error(R"({"descriptors":[{"hitsAddend":1,"hits_addend":2}]})") ==
        "descriptors[0]: duplicate field 'hits_addend'");
  CHECK(parse_error(R"({"descriptors":[{"limit":{"unit":1,"requestsPerUnit":1,"requests_per_unit":1}}]})") ==
        "descriptors[0].limit: duplicate field 'requests_per_unit'");
  // Each object has its own set; the request's survives its nested arrays.
  parse_ok(R"({"descriptors":[{"entries":[{"key":"a"},{"key":"b"}]},{"entries":[]}],"domain":"d"})");
  CHECK(parse_error(R"({"domain":"d","descriptors":[{"entries":[]}],"domain":"e"})") ==
        "duplicate field 'domain'");
}

namespace {

void add_header(google::protobuf::RepeatedPtrField<envoy::config::core::v3::HeaderValue>* headers,
                std::string key, std::string value) {
  auto* h = headers->Add();
  h->set_key(std::move(key));
  h->set_value(std::move(value));
}

}  // namespace

TEST_CASE("serialize: the reference example") {
  rls_response response;
  response.set_overall_code(rls_response::OVER_LIMIT);
  for (int i = 0; i < 2; ++i) {
    auto* s = response.add_statuses();
    s->set_code(i == 0 ? rls_response::OVER_LIMIT : rls_response::OK);
    s->mutable_current_limit()->set_requests_per_unit(i + 1);
    s->mutable_current_limit()->set_unit(rls_response::RateLimit::MINUTE);
    s->set_limit_remaining(i);
    s->mutable_duration_until_reset()->set_seconds(42);
  }
  CHECK(api::response_to_json(response) ==
        R"({"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":1,)"
        R"("unit":"MINUTE"},"durationUntilReset":"42s"},{"code":"OK","currentLimit":{"requestsPerUnit":2,)"
        R"("unit":"MINUTE"},"limitRemaining":1,"durationUntilReset":"42s"}]})");
}

TEST_CASE("serialize: zero values and unset messages are omitted") {
  rls_response response;
  CHECK(api::response_to_json(response) == "{}");
  response.set_overall_code(rls_response::OK);
  response.add_statuses();
  auto* s = response.add_statuses();
  s->mutable_current_limit()->set_name("per_user");
  s->mutable_current_limit()->set_unit(rls_response::RateLimit::WEEK);
  s->mutable_duration_until_reset();
  auto* t = response.add_statuses();
  t->mutable_current_limit();
  t->set_code(static_cast<rls_response::Code>(7));
  CHECK(api::response_to_json(response) ==
        R"({"overallCode":"OK","statuses":[{},{"currentLimit":{"name":"per_user","unit":"WEEK"},)"
        R"("durationUntilReset":"0s"},{"code":7,"currentLimit":{}}]})");
}

TEST_CASE("serialize: durations with nanos") {
  auto duration = [](std::int64_t seconds, std::int32_t nanos) {
    rls_response response;
    auto* d = response.add_statuses()->mutable_duration_until_reset();
    d->set_seconds(seconds);
    d->set_nanos(nanos);
    return api::response_to_json(response);
  };
  auto expect = [](std::string_view text) {
    return R"({"statuses":[{"durationUntilReset":")" + std::string(text) + "\"}]}";
  };
  CHECK(duration(58, 0) == expect("58s"));
  CHECK(duration(1, 500000000) == expect("1.500s"));
  CHECK(duration(0, 1000) == expect("0.000001s"));
  CHECK(duration(0, 120000) == expect("0.000120s"));
  CHECK(duration(2, 3) == expect("2.000000003s"));
  CHECK(duration(-1, -500000000) == expect("-1.500s"));
  CHECK(duration(0, -5) == expect("-0.000000005s"));
}

TEST_CASE("serialize: headers, escaping and round trip") {
  rls_response response;
  response.set_overall_code(rls_response::OK);
  auto* s = response.add_statuses();
  s->set_code(rls_response::OK);
  s->mutable_current_limit()->set_name("quote\"d");
  s->mutable_current_limit()->set_requests_per_unit(100);
  s->mutable_current_limit()->set_unit(rls_response::RateLimit::SECOND);
  s->set_limit_remaining(99);
  add_header(response.mutable_response_headers_to_add(), "x-ratelimit-limit", "100, 100;w=1");
  add_header(response.mutable_response_headers_to_add(), "x-odd", "a\"b\nc\\d\x01\te</>\xc3\xa9");
  add_header(response.mutable_request_headers_to_add(), "x-empty", "");

  const std::string json = api::response_to_json(response);
  CHECK(
      json ==
      R"({"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"quote\"d","requestsPerUnit":100,)"
      R"("unit":"SECOND"},"limitRemaining":99}],"responseHeadersToAdd":[{"key":"x-ratelimit-limit",)"
      R"("value":"100, 100;w=1"},{"key":"x-odd","value":"a\"b\nc\\d\u0001\te</>)"
      "\xc3\xa9"
      R"("}],"requestHeadersToAdd":[{"key":"x-empty"}]})");

  // Every control character is escaped, with Go's short forms where it has them.
  rls_response controls;
  add_header(controls.mutable_request_headers_to_add(), "k", std::string("\0\b\f\r\x1f\x7f", 6));
  CHECK(api::response_to_json(controls) == R"({"requestHeadersToAdd":[{"key":"k","value":"\u0000\b\f\r\u001f)"
                                           "\x7f"
                                           R"("}]})");

  // A JSON reader gets back exactly the original strings.
  const auto v = boost::json::parse(json).as_object();
  const auto& headers = v.at("responseHeadersToAdd").as_array();
  REQUIRE(headers.size() == 2);
  CHECK(headers[1].at("value").as_string() == response.response_headers_to_add(1).value());
  CHECK(v.at("statuses").as_array()[0].at("currentLimit").at("name").as_string() == "quote\"d");
  CHECK(v.at("requestHeadersToAdd").as_array()[0].as_object().size() == 1);
}

TEST_CASE("parse: is_negative_hits per descriptor, in both spellings, booleans only") {
  auto r = parse_ok(R"({"descriptors":[{"is_negative_hits":true},{"isNegativeHits":false},{}]})");
  CHECK(r.descriptors(0).is_negative_hits());
  CHECK_FALSE(r.descriptors(1).is_negative_hits());
  CHECK_FALSE(r.descriptors(2).is_negative_hits());
  CHECK(parse_error(R"({"descriptors":[{"isNegativeHits":"true"}]})") ==
        "descriptors[0].isNegativeHits: expected a boolean");
  CHECK(parse_error(R"({"descriptors":[{"is_negative_hits":1}]})") ==
        "descriptors[0].is_negative_hits: expected a boolean");
  CHECK(parse_error(R"({"descriptors":[{"isNegativeHits":true,"is_negative_hits":true}]})") ==
        "descriptors[0]: duplicate field 'is_negative_hits'");
  CHECK(parse_error(R"({"domain":true})") == "domain: expected a string");
}

TEST_CASE("serialize: dynamic metadata as protojson writes a Struct") {
  rls_response response;
  response.set_overall_code(rls_response::OK);
  auto& fields = *response.mutable_dynamic_metadata()->mutable_fields();
  fields["domain"].set_string_value("d\"q");
  fields["b"].set_number_value(1);
  fields["a"].set_number_value(0.5);
  fields["big"].set_number_value(1e21);
  fields["plain"].set_number_value(1e20);
  fields["tiny"].set_number_value(1e-7);
  fields["neg"].set_number_value(-3);
  fields["p60"].set_number_value(1152921504606846976.0);  // 2^60: Go prints the shortest digits, zero-padded
  fields["small"].set_number_value(-0.00125);
  fields["zero"].set_number_value(0);
  auto* list = fields["list"].mutable_list_value();
  list->add_values()->set_bool_value(true);
  list->add_values()->set_null_value(google::protobuf::NULL_VALUE);
  (*list->add_values()->mutable_struct_value()->mutable_fields())["k"].set_string_value("v");
  fields["empty"].mutable_struct_value();
  const auto json = api::response_to_json(response);
  CHECK(json ==
        R"({"overallCode":"OK","dynamicMetadata":{"a":0.5,"b":1,"big":1e+21,"domain":"d\"q","empty":{},)"
        R"("list":[true,null,{"k":"v"}],"neg":-3,"p60":1152921504606847000,"plain":100000000000000000000,)"
        R"("small":-0.00125,"tiny":1e-7,"zero":0}})");
  CHECK_NOTHROW(boost::json::parse(json));
}
