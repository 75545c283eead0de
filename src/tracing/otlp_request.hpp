#pragma once
// A batch of finished spans as the bytes of one OTLP ExportTraceServiceRequest (opentelemetry-proto, trace
// v1): one ResourceSpans with the process's resource, one ScopeSpans. The same bytes go out as an OTLP/gRPC
// message and as the body of OTLP/HTTP. Written straight to the wire format, without building the messages:
// that costs a fifth of what protobuf's classes cost (BENCHMARKS.md, issue 16).

#include <span>
#include <string>

#include "tracing/span.hpp"

namespace sluice::tracing {

std::string encode_export_request(const resource_info& resource, std::span<const finished_span> spans);

}  // namespace sluice::tracing
