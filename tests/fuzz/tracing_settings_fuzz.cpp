// libFuzzer: what a user writes in the tracing settings (tracing/settings) and what tracing prints of a
// message (tracing/proto_text). The input's first lines are, in turn, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_ENDPOINT, TRACING_EXPORTER_PROTOCOL and OTEL_EXPORTER_OTLP_INSECURE; the rest is a
// RateLimitResponse, and a RateLimitRequest, on the wire. Checks: no crash; settings either load or throw
// settings_error; every header has a key; a loaded endpoint has a host and a port; Go's text of any message
// that parses is one line; the request's own writer agrees with the reflective one.
//
// Build and run: scripts/fuzz tracing_settings [seconds]

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "rls.pb.h"
#include "tracing/proto_text.hpp"
#include "tracing/settings.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void quiet(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace

// protobuf logs every string field with invalid UTF-8 it refuses to parse: expected here, and noise.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(quiet);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::array<std::string_view, 4> lines{};
  for (auto& line : lines) {
    const auto end = rest.find('\n');
    line = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  }
  std::map<std::string, std::string> env{{"TRACING_ENABLED", "true"},
                                         {"OTEL_EXPORTER_OTLP_HEADERS", std::string(lines[0])},
                                         {"OTEL_EXPORTER_OTLP_ENDPOINT", std::string(lines[1])},
                                         {"TRACING_EXPORTER_PROTOCOL", std::string(lines[2])},
                                         {"OTEL_EXPORTER_OTLP_INSECURE", std::string(lines[3])}};
  try {
    const auto s = sluice::tracing::read_settings(sluice::core::env_reader(env));
    for (const auto& [key, value] : s.exporter.headers) check(!key.empty());
    check(!s.exporter.host.empty() && !s.exporter.port.empty());
  } catch (const sluice::core::settings_error&) {
  }
  envoy::service::ratelimit::v3::RateLimitResponse response;
  if (response.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) {
    check(sluice::tracing::go_text(response).find('\n') == std::string::npos);
  }
  envoy::service::ratelimit::v3::RateLimitRequest request;
  if (request.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) {
    check(sluice::tracing::go_text(request) ==
          sluice::tracing::go_text(static_cast<const google::protobuf::Message&>(request)));
  }
  return 0;
}
