#pragma once
// A batch of finished spans as one OTLP ExportTraceServiceRequest (opentelemetry-proto, trace v1): one
// ResourceSpans with the process's resource, one ScopeSpans. The same message goes out over OTLP/gRPC and as
// the body of OTLP/HTTP.

#include <span>

#include "otlp_trace_service.pb.h"
#include "tracing/span.hpp"

namespace sluice::tracing {

opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest make_export_request(
    const resource_info& resource, std::span<const finished_span> spans);

}  // namespace sluice::tracing
