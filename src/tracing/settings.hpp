#pragma once
// Tracing's settings, read once at start-up: upstream's TRACING_* (reference §1.9) and the standard
// OpenTelemetry variables its Go exporters read (OTEL_EXPORTER_OTLP_*, the per-signal
// OTEL_EXPORTER_OTLP_TRACES_* winning) and its batch span processor reads (OTEL_BSP_*). A bad value throws
// core::settings_error naming it.

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/env.hpp"
#include "tracing/span.hpp"

namespace sluice::tracing {

enum class export_protocol { http, grpc };

struct exporter_settings {
  export_protocol protocol = export_protocol::http;
  std::string endpoint = "http://localhost:4318/v1/traces";  // as the log names it
  std::string host = "localhost";
  std::string port = "4318";
  std::string path = "/v1/traces";  // http only
  bool tls = false;                 // https://, or grpc without a scheme and without INSECURE
  std::string ca_file;              // CERTIFICATE: trusted for the collector (else the system's CAs)
  std::string client_cert_file;     // CLIENT_CERTIFICATE and CLIENT_KEY: mutual TLS
  std::string client_key_file;
  std::vector<std::pair<std::string, std::string>> headers;  // TRACES_HEADERS, else HEADERS
  std::chrono::milliseconds timeout{10000};                  // TIMEOUT: one export request
  bool gzip = false;                                         // COMPRESSION=gzip
};

struct batch_settings {
  std::chrono::milliseconds schedule_delay{5000};   // OTEL_BSP_SCHEDULE_DELAY: longest a span waits
  std::size_t max_queue_size = 2048;                // OTEL_BSP_MAX_QUEUE_SIZE: spans held, all workers
  std::size_t max_export_batch_size = 512;          // OTEL_BSP_MAX_EXPORT_BATCH_SIZE
  std::chrono::milliseconds export_timeout{30000};  // OTEL_BSP_EXPORT_TIMEOUT: one batch, retries included
};

// Which requests are recorded: TRACING_SAMPLING_RATE (upstream's parentbased_traceidratio), or
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG when set.
struct sampler_settings {
  double ratio = 1.0;
  bool parent_based = true;
  std::string name = "parentbased_traceidratio";  // as the log shows it
};

struct settings {
  bool enabled = false;  // TRACING_ENABLED, unless OTEL_SDK_DISABLED=true
  // TRACING_SERVICE_NAME, _NAMESPACE, _INSTANCE_ID (a UUIDv4 when empty); OTEL_SERVICE_NAME and
  // OTEL_RESOURCE_ATTRIBUTES win when set.
  resource_info resource;
  sampler_settings sampler;
  exporter_settings exporter;
  batch_settings batch;
};

// Nothing but TRACING_ENABLED (and OTEL_SDK_DISABLED) is read while tracing is off. Where an OpenTelemetry
// variable and upstream's TRACING_* say the same thing, the OpenTelemetry one wins when it is set: platforms
// set TRACING_* for every install, a user sets OTEL_* to override them (docs/guides/observe/tracing.md).
settings read_settings(const core::env_reader& env);
// Their declarations (core/setting.hpp), OTEL_EXPORTER_OTLP_TRACES_* listed one by one.
std::vector<core::setting> tracing_settings();

// A random (version 4) UUID, lower-case: "xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx".
std::string random_uuid_v4();

// OTEL_RESOURCE_ATTRIBUTES: "k1=v1,k2=v2" with percent-encoded values; throws core::settings_error naming it.
std::vector<std::pair<std::string, std::string>> parse_resource_attributes(const std::string& text);

// "k1=v1,k2=v2" with percent-encoded keys and values (the OTLP exporter's header lists); throws
// core::settings_error naming `name` for an item without '=', an empty key or a bad escape, a name outside
// letters, digits, '-', '_' and '.', or a value that is not printable ASCII (at most 8 KiB).
std::vector<std::pair<std::string, std::string>> parse_header_list(const std::string& name,
                                                                   const std::string& text);

}  // namespace sluice::tracing
