#include "tracing/otlp_request.hpp"

namespace sluice::tracing {

namespace {

namespace common = opentelemetry::proto::common::v1;
namespace trace = opentelemetry::proto::trace::v1;

// OTLP span flags: the W3C trace flags in bits 0-7 (sampled: exported spans are), bit 8 "is the parent remote
// known", bit 9 "the parent is remote".
constexpr std::uint32_t flag_sampled = 0x1, flag_remote_known = 0x100, flag_remote = 0x200;

void set(common::KeyValue& kv, const std::string& key, const attribute_value& value) {
  kv.set_key(key);
  auto& v = *kv.mutable_value();
  std::visit(
      [&v](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          v.set_string_value(x);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          v.set_int_value(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          v.set_bool_value(x);
        } else {
          v.set_double_value(x);
        }
      },
      value);
}

template <std::size_t N>
std::string bytes(const std::array<std::uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

}  // namespace

opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest make_export_request(
    const resource_info& resource, std::span<const finished_span> spans) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest request;
  auto& rs = *request.add_resource_spans();
  auto& attributes = *rs.mutable_resource()->mutable_attributes();
  set(*attributes.Add(), "service.name", resource.service_name);
  // Always, even empty, as upstream's resource has it.
  set(*attributes.Add(), "service.namespace", resource.service_namespace);
  if (!resource.service_instance_id.empty())
    set(*attributes.Add(), "service.instance.id", resource.service_instance_id);
  auto& scope_spans = *rs.add_scope_spans();
  scope_spans.mutable_scope()->set_name(resource.scope_name);
  scope_spans.mutable_scope()->set_version(resource.scope_version);
  for (const auto& s : spans) {
    auto& out = *scope_spans.add_spans();
    out.set_trace_id(bytes(s.trace_id));
    out.set_span_id(bytes(s.span_id));
    out.set_trace_state(s.trace_state);
    if (s.parent_span_id) out.set_parent_span_id(bytes(*s.parent_span_id));
    out.set_flags(flag_sampled | flag_remote_known | (s.parent_is_remote ? flag_remote : 0));
    out.set_name(s.name);
    out.set_kind(static_cast<trace::Span::SpanKind>(s.kind));
    out.set_start_time_unix_nano(s.start_unix_nano);
    out.set_end_time_unix_nano(s.end_unix_nano);
    for (const auto& [key, value] : s.attributes) set(*out.add_attributes(), key, value);
    if (s.error) {
      out.mutable_status()->set_code(trace::Status::STATUS_CODE_ERROR);
      out.mutable_status()->set_message(s.status_message);
    }
  }
  return request;
}

}  // namespace sluice::tracing
