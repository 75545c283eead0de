#include <doctest/doctest.h>

#include "otlp_trace_service.pb.h"
#include "tracing/otlp_request.hpp"

using namespace sluice::tracing;

TEST_CASE("OTLP: spans become one ResourceSpans with the resource, the scope and every field") {
  resource_info resource;
  resource.service_namespace = "edge";
  resource.service_instance_id = "0b5f3c6e-3a1f-4d8e-9c1a-7f2e5d4c3b2a";
  resource.scope_version = "0.1.0";
  finished_span server;
  server.trace_id.fill(0x4b);
  server.span_id.fill(0x01);
  server.parent_span_id = std::array<std::uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8};
  server.parent_is_remote = true;
  server.trace_state = "rojo=1";
  server.name = "ShouldRateLimit Execution";
  server.kind = span_kind::server;
  server.start_unix_nano = 1'700'000'000'000'000'000;
  server.end_unix_nano = 1'700'000'000'000'250'000;
  server.attributes = {{"domain", std::string("mesh")},
                       {"pipeline length", std::int64_t{2}},
                       {"shadow", true},
                       {"ratio", 0.5}};
  finished_span child;
  child.trace_id = server.trace_id;
  child.span_id.fill(0x02);
  child.parent_span_id = server.span_id;
  child.name = "Redis Pipeline Execution";
  child.error = true;
  child.status_message = "Redis is not connected";
  const finished_span spans[] = {server, child};

  const auto bytes = encode_export_request(resource, spans);
  // What a collector reads: the bytes parsed back.
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest read;
  REQUIRE(read.ParseFromString(bytes));
  // Exactly protobuf's own encoding of the same message.
  CHECK(read.SerializeAsString() == bytes);
  REQUIRE(read.resource_spans_size() == 1);
  const auto& rs = read.resource_spans(0);
  REQUIRE(rs.resource().attributes_size() == 3);
  CHECK(rs.resource().attributes(0).key() == "service.name");
  CHECK(rs.resource().attributes(0).value().string_value() == "RateLimit");
  CHECK(rs.resource().attributes(1).key() == "service.namespace");
  CHECK(rs.resource().attributes(2).value().string_value() == resource.service_instance_id);
  REQUIRE(rs.scope_spans_size() == 1);
  CHECK(rs.scope_spans(0).scope().name() == "sluice");
  CHECK(rs.scope_spans(0).scope().version() == "0.1.0");
  REQUIRE(rs.scope_spans(0).spans_size() == 2);
  const auto& s = rs.scope_spans(0).spans(0);
  CHECK(s.trace_id() == std::string(16, '\x4b'));
  CHECK(s.span_id() == std::string(8, '\x01'));
  CHECK(s.parent_span_id() == std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  CHECK(s.trace_state() == "rojo=1");
  CHECK(s.flags() == 0x301);  // sampled, parent known to be remote
  CHECK(s.name() == "ShouldRateLimit Execution");
  CHECK(s.kind() == opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  CHECK(s.start_time_unix_nano() == 1'700'000'000'000'000'000u);
  CHECK(s.end_time_unix_nano() == 1'700'000'000'000'250'000u);
  REQUIRE(s.attributes_size() == 4);
  CHECK(s.attributes(0).value().string_value() == "mesh");
  CHECK(s.attributes(1).key() == "pipeline length");
  CHECK(s.attributes(1).value().int_value() == 2);
  CHECK(s.attributes(2).value().bool_value());
  CHECK(s.attributes(3).value().double_value() == 0.5);
  CHECK_FALSE(s.has_status());
  const auto& c = rs.scope_spans(0).spans(1);
  CHECK(c.parent_span_id() == std::string(8, '\x01'));
  CHECK(c.flags() == 0x101);  // sampled, parent known to be local
  CHECK(c.kind() == opentelemetry::proto::trace::v1::Span::SPAN_KIND_INTERNAL);
  CHECK(c.status().code() == opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  CHECK(c.status().message() == "Redis is not connected");
}

TEST_CASE("OTLP: a root span has no parent; an empty namespace is still sent (as upstream), no instance id") {
  finished_span root;
  root.trace_id.fill(7);
  root.span_id.fill(9);
  const finished_span spans[] = {root};
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  REQUIRE(request.ParseFromString(encode_export_request(resource_info{}, spans)));
  const auto& rs = request.resource_spans(0);
  REQUIRE(rs.resource().attributes_size() == 2);
  CHECK(rs.resource().attributes(1).key() == "service.namespace");
  CHECK(rs.resource().attributes(1).value().string_value().empty());
  CHECK(rs.scope_spans(0).spans(0).parent_span_id().empty());
  CHECK(rs.scope_spans(0).spans(0).flags() == 0x101);
}

TEST_CASE("OTLP: attribute values that are zero are still sent (AnyValue is a oneof)") {
  finished_span s;
  s.trace_id.fill(1);
  s.span_id.fill(2);
  s.attributes = {
      {"s", std::string()}, {"i", std::int64_t{0}}, {"b", false}, {"d", 0.0}, {"n", std::int64_t{-3}}};
  const finished_span spans[] = {s};
  const auto bytes = encode_export_request(resource_info{}, spans);
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest read;
  REQUIRE(read.ParseFromString(bytes));
  CHECK(read.SerializeAsString() == bytes);
  const auto& a = read.resource_spans(0).scope_spans(0).spans(0).attributes();
  REQUIRE(a.size() == 5);
  CHECK(a[0].value().has_string_value());
  CHECK(a[1].value().has_int_value());
  CHECK(a[2].value().has_bool_value());
  CHECK(a[3].value().has_double_value());
  CHECK(a[4].value().int_value() == -3);
}
