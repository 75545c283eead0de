#pragma once
// A finished span, as Sluice records it on the request path and hands to the exporter: its context, its
// parent (when the request carried one, or when it is a child of Sluice's own span), name, kind, times and
// attributes.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace sluice::tracing {

enum class span_kind : std::uint8_t { internal = 1, server = 2, client = 3 };

using attribute_value = std::variant<std::string, std::int64_t, bool, double>;

struct finished_span {
  std::array<std::uint8_t, 16> trace_id{};
  std::array<std::uint8_t, 8> span_id{};
  std::optional<std::array<std::uint8_t, 8>> parent_span_id;
  std::string trace_state;
  bool parent_is_remote = false;  // the parent came in with the request
  std::string name;
  span_kind kind = span_kind::internal;
  std::uint64_t start_unix_nano = 0;
  std::uint64_t end_unix_nano = 0;
  std::vector<std::pair<std::string, attribute_value>> attributes;
  bool error = false;  // status ERROR with `status_message`; else UNSET, as OpenTelemetry leaves it
  std::string status_message;
};

// The process's resource and scope: service.name, service.namespace, service.instance.id (reference §1.9).
struct resource_info {
  std::string service_name = "RateLimit";
  std::string service_namespace;
  std::string service_instance_id;
  // OTEL_RESOURCE_ATTRIBUTES but service.name, service.namespace and service.instance.id (above), in order.
  std::vector<std::pair<std::string, std::string>> attributes;
  std::string scope_name = "sluice";
  std::string scope_version;
};

}  // namespace sluice::tracing
