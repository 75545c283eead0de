#include "tracing/otlp_request.hpp"

#include <bit>
#include <type_traits>
#include <vector>

namespace sluice::tracing {

namespace {

// OTLP span flags: the W3C trace flags in bits 0-7 (sampled: exported spans are), bit 8 "is the parent remote
// known", bit 9 "the parent is remote".
constexpr std::uint32_t flag_sampled = 0x1, flag_remote_known = 0x100, flag_remote = 0x200;
constexpr std::uint64_t status_code_error = 2;

enum wire_type : std::uint32_t { varint_type = 0, fixed64_type = 1, length_type = 2, fixed32_type = 5 };

// Protobuf's wire format. A nested message is written into a buffer of its depth and copied into its parent,
// length first, when it ends (the buffers are kept, so a batch allocates little). Fields are written when
// set: proto3 leaves zeros out, except inside a oneof (`always`).
class wire_writer {
 public:
  wire_writer() : levels_(1) {}

  void begin() {
    if (levels_.size() <= ++depth_) levels_.emplace_back();
    levels_[depth_].clear();
  }
  void end(std::uint32_t field) {
    const std::string& inner = levels_[depth_--];
    tag(field, length_type);
    varint(inner.size());
    out().append(inner);
  }
  void bytes(std::uint32_t field, std::string_view s, bool always = false) {
    if (s.empty() && !always) return;
    tag(field, length_type);
    varint(s.size());
    out().append(s);
  }
  void uint(std::uint32_t field, std::uint64_t v, bool always = false) {
    if (v == 0 && !always) return;
    tag(field, varint_type);
    varint(v);
  }
  void fixed(std::uint32_t field, std::uint64_t v, bool always = false) {
    if (v == 0 && !always) return;
    tag(field, fixed64_type);
    little_endian(v, 8);
  }
  void fixed32(std::uint32_t field, std::uint32_t v) {
    if (v == 0) return;
    tag(field, fixed32_type);
    little_endian(v, 4);
  }
  std::string take() { return std::move(levels_[0]); }

 private:
  std::string& out() { return levels_[depth_]; }
  void tag(std::uint32_t field, wire_type type) { varint((std::uint64_t{field} << 3) | type); }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out().push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out().push_back(static_cast<char>(v));
  }
  void little_endian(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i, v >>= 8) out().push_back(static_cast<char>(v & 0xff));
  }

  std::vector<std::string> levels_;
  std::size_t depth_ = 0;
};

// common.v1.KeyValue {key = 1; AnyValue value = 2}; AnyValue is a oneof {string_value = 1; bool_value = 2;
// int_value = 3; double_value = 4}.
void key_value(wire_writer& w, std::uint32_t field, std::string_view key, const attribute_value& value) {
  w.begin();
  w.bytes(1, key);
  w.begin();
  std::visit(
      [&w](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          w.bytes(1, x, true);
        } else if constexpr (std::is_same_v<T, bool>) {
          w.uint(2, x ? 1 : 0, true);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          w.uint(3, static_cast<std::uint64_t>(x), true);
        } else {
          w.fixed(4, std::bit_cast<std::uint64_t>(x), true);
        }
      },
      value);
  w.end(2);
  w.end(field);
}

template <std::size_t N>
std::string_view id_bytes(const std::array<std::uint8_t, N>& id) {
  return {reinterpret_cast<const char*>(id.data()), N};
}

// trace.v1.Span.
void span_message(wire_writer& w, const finished_span& s) {
  w.begin();
  w.bytes(1, id_bytes(s.trace_id));
  w.bytes(2, id_bytes(s.span_id));
  w.bytes(3, s.trace_state);
  if (s.parent_span_id) w.bytes(4, id_bytes(*s.parent_span_id));
  w.bytes(5, s.name);
  w.uint(6, static_cast<std::uint64_t>(s.kind));
  w.fixed(7, s.start_unix_nano);
  w.fixed(8, s.end_unix_nano);
  for (const auto& [key, value] : s.attributes) key_value(w, 9, key, value);
  if (s.error) {
    w.begin();  // Status {message = 2; code = 3}
    w.bytes(2, s.status_message);
    w.uint(3, status_code_error);
    w.end(15);
  }
  w.fixed32(16, flag_sampled | flag_remote_known | (s.parent_is_remote ? flag_remote : 0));
  w.end(2);
}

}  // namespace

std::string encode_export_request(const resource_info& resource, std::span<const finished_span> spans) {
  wire_writer w;
  w.begin();  // ResourceSpans {Resource resource = 1; repeated ScopeSpans scope_spans = 2}
  w.begin();  // Resource {repeated KeyValue attributes = 1}
  key_value(w, 1, "service.name", resource.service_name);
  // Always, even empty, as upstream's resource has it.
  key_value(w, 1, "service.namespace", resource.service_namespace);
  if (!resource.service_instance_id.empty())
    key_value(w, 1, "service.instance.id", resource.service_instance_id);
  for (const auto& [key, value] : resource.attributes) key_value(w, 1, key, value);
  w.end(1);
  w.begin();  // ScopeSpans {InstrumentationScope scope = 1; repeated Span spans = 2}
  w.begin();  // InstrumentationScope {name = 1; version = 2}
  w.bytes(1, resource.scope_name);
  w.bytes(2, resource.scope_version);
  w.end(1);
  for (const auto& s : spans) span_message(w, s);
  w.end(2);
  w.end(1);  // ExportTraceServiceRequest {repeated ResourceSpans resource_spans = 1}
  return w.take();
}

}  // namespace sluice::tracing
