// libFuzzer: trace context headers a client sends (tracing/propagation). The input's lines are, in turn,
// traceparent, tracestate, b3, X-B3-TraceId, X-B3-SpanId, X-B3-Sampled and X-B3-Flags. Checks: no crash;
// every context parsed has non-zero ids; a W3C context written back as a traceparent parses to the same ids
// and decision; extract() gives B3's context when B3 parses, else W3C's.
//
// Build and run: scripts/fuzz trace_context [seconds]

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tracing/propagation.hpp"

namespace {

using namespace sluice::tracing;

void check(bool ok) {
  if (!ok) std::abort();
}

template <std::size_t N>
bool nonzero(const std::array<std::uint8_t, N>& bytes) {
  for (auto b : bytes)
    if (b != 0) return true;
  return false;
}

bool same_ids(const span_context& a, const span_context& b) {
  return a.trace_id == b.trace_id && a.span_id == b.span_id;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::array<std::string_view, 7> lines{};
  for (auto& line : lines) {
    const auto end = rest.find('\n');
    line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  }
  const auto w3c = parse_traceparent(lines[0], lines[1]);
  if (w3c) {
    check(nonzero(w3c->trace_id) && nonzero(w3c->span_id) && w3c->sampled.has_value());
    const auto again = parse_traceparent(format_traceparent(*w3c), w3c->tracestate);
    check(again && same_ids(*again, *w3c) && again->sampled == w3c->sampled &&
          again->tracestate == w3c->tracestate);
  }
  const auto single = parse_b3_single(lines[2]);
  if (single) check(nonzero(single->trace_id) && nonzero(single->span_id));
  const auto multi = parse_b3_multi(lines[3], lines[4], lines[5], lines[6]);
  if (multi) check(nonzero(multi->trace_id) && nonzero(multi->span_id));

  const header_lookup header = [&](std::string_view name) -> std::optional<std::string_view> {
    static constexpr std::array<std::string_view, 7> names{
        "traceparent", "tracestate", "b3", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled", "x-b3-flags"};
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == name && !lines[i].empty()) return lines[i];
    return std::nullopt;
  };
  const auto extracted = extract(header);
  // A single header that does not parse falls back to the multiple ones, as OpenTelemetry's B3 propagator
  // does.
  const auto b3 = single ? single : (!lines[3].empty() ? multi : std::nullopt);
  const auto expected = b3 ? b3 : (lines[0].empty() ? std::nullopt : w3c);
  check(extracted.has_value() == expected.has_value());
  if (extracted) check(same_ids(*extracted, *expected) && extracted->sampled == expected->sampled);
  return 0;
}
