#pragma once
// The trace context a request carries in (reference §1.9: OpenTelemetry's composite propagator of W3C Trace
// Context, B3 and Baggage, in that order), without I/O: W3C `traceparent` and `tracestate`, B3's single `b3`
// header and its `X-B3-*` headers. A malformed header is ignored (the request starts a new trace), as the
// specifications ask; B3, extracted after W3C, wins when both are valid. And the `traceparent` Sluice sends.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::tracing {

struct span_context {
  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> span_id{};
  // The parent's sampling decision; nothing when it deferred it (B3 without a sampling state).
  std::optional<bool> sampled;
  std::string tracestate;  // W3C only: kept as received when valid, else empty
};

// W3C Trace Context (level 1): "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>", lower-case hex, ids not
// all zero, version ff refused, a later version's extra fields after a '-' allowed. `tracestate` is kept when
// every member is valid (at most 32), dropped otherwise.
std::optional<span_context> parse_traceparent(std::string_view traceparent, std::string_view tracestate);
// B3 single header: "<trace id>-<span id>[-<sampling>[-<parent span id>]]", trace id of 16 or 32 hex digits
// (64-bit ids padded with zeros), sampling 0, 1 or d (debug: sampled). A sampling state alone ("0") carries
// no context: nothing.
std::optional<span_context> parse_b3_single(std::string_view b3);
// B3 multiple headers: X-B3-TraceId, X-B3-SpanId, X-B3-Sampled (1, 0, or the legacy true/false) and
// X-B3-Flags (1: debug, sampled). Empty views for absent headers.
std::optional<span_context> parse_b3_multi(std::string_view trace_id, std::string_view span_id,
                                           std::string_view sampled, std::string_view flags);

// The headers extract() reads, lower-case: a server keeps these for it.
inline constexpr std::array<std::string_view, 7> context_headers{
    "traceparent", "tracestate", "b3", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled", "x-b3-flags"};

// A request's headers (gRPC metadata or HTTP), by lower-case name; nothing when absent.
using header_lookup = std::function<std::optional<std::string_view>(std::string_view name)>;
// W3C, then B3 (single, else multiple) over it.
std::optional<span_context> extract(const header_lookup& header);

// "00-<trace id>-<span id>-<01|00>" (deferred counts as not sampled).
std::string format_traceparent(const span_context& context);

}  // namespace sluice::tracing
