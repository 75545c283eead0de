#include <doctest/doctest.h>

#include <map>

#include "tracing/settings.hpp"

using namespace sluice;
using tracing::export_protocol;

namespace {

tracing::settings read(std::map<std::string, std::string> env) {
  env.emplace("TRACING_ENABLED", "true");
  return tracing::read_settings(core::env_reader(std::move(env)));
}

std::string error_of(std::map<std::string, std::string> env) {
  try {
    read(std::move(env));
  } catch (const core::settings_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("off by default; on, upstream's defaults and OpenTelemetry's") {
  CHECK_FALSE(tracing::read_settings(core::env_reader(std::map<std::string, std::string>{})).enabled);
  auto s = read({});
  CHECK(s.enabled);
  CHECK(s.resource.service_name == "RateLimit");
  CHECK(s.resource.service_namespace.empty());
  CHECK(s.resource.service_instance_id.size() == 36);
  CHECK(s.sampler.ratio == 1.0);
  CHECK(s.exporter.protocol == export_protocol::http);
  CHECK(s.exporter.endpoint == "http://localhost:4318/v1/traces");
  CHECK_FALSE(s.exporter.tls);
  CHECK(s.exporter.timeout == std::chrono::milliseconds(10000));
  CHECK_FALSE(s.exporter.gzip);
  CHECK(s.batch.schedule_delay == std::chrono::milliseconds(5000));
  CHECK(s.batch.max_queue_size == 2048);
  CHECK(s.batch.max_export_batch_size == 512);
  auto g = read({{"TRACING_EXPORTER_PROTOCOL", "grpc"}});
  CHECK(g.exporter.protocol == export_protocol::grpc);
  CHECK(g.exporter.endpoint == "localhost:4317");
  CHECK_FALSE(g.exporter.tls);
}

TEST_CASE("a random UUIDv4 instance id when none is given, different each time") {
  auto a = tracing::random_uuid_v4(), b = tracing::random_uuid_v4();
  CHECK(a != b);
  REQUIRE(a.size() == 36);
  CHECK(a[8] == '-');
  CHECK(a[13] == '-');
  CHECK(a[14] == '4');
  CHECK(std::string_view("89ab").find(a[19]) != std::string_view::npos);
  CHECK(read({{"TRACING_SERVICE_INSTANCE_ID", "pod-1"}}).resource.service_instance_id == "pod-1");
}

TEST_CASE("endpoints: the general one is a base for /v1/traces, the per-signal one is used as it is") {
  auto base = read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/otlp/"}});
  CHECK(base.exporter.tls);
  CHECK(base.exporter.host == "collector");
  CHECK(base.exporter.port == "4318");
  CHECK(base.exporter.path == "/otlp/v1/traces");
  auto signal = read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"},
                      {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://[::1]:9000/custom"}});
  CHECK(signal.exporter.host == "::1");
  CHECK(signal.exporter.path == "/custom");
  CHECK(signal.exporter.endpoint == "http://[::1]:9000/custom");
  CHECK(read({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:1"}}).exporter.path == "/");
  CHECK(read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://h"}}).exporter.port == "443");
  // gRPC: the scheme decides TLS; without one, INSECURE does (TLS by default).
  auto grpc = [](std::map<std::string, std::string> env) {
    env.emplace("TRACING_EXPORTER_PROTOCOL", "grpc");
    return read(std::move(env)).exporter;
  };
  CHECK(grpc({{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4317"}}).tls);
  CHECK_FALSE(grpc({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"}}).tls);
  CHECK(grpc({{"OTEL_EXPORTER_OTLP_ENDPOINT", "c:4317"}}).tls);
  CHECK_FALSE(grpc({{"OTEL_EXPORTER_OTLP_ENDPOINT", "c:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE", "true"}}).tls);
  // Without a port, the scheme's: gRPC dials a bare host (TLS) at 443.
  CHECK(grpc({{"OTEL_EXPORTER_OTLP_ENDPOINT", "c"}}).endpoint == "c:443");
  CHECK(grpc({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"}}).endpoint == "c:80");
}

TEST_CASE("the protocol: TRACING_EXPORTER_PROTOCOL, else OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL") {
  CHECK(read({{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}).exporter.protocol == export_protocol::grpc);
  CHECK(
      read({{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"}})
          .exporter.protocol == export_protocol::http);
  CHECK(read({{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, {"TRACING_EXPORTER_PROTOCOL", "http"}})
            .exporter.protocol == export_protocol::http);
}

TEST_CASE("headers: percent-decoded; the per-signal list, when set, replaces the general one (as Go)") {
  using h = std::pair<std::string, std::string>;
  CHECK(read({{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, tenant=1"}}).exporter.headers ==
        std::vector<h>{{"api-key", "a b"}, {"tenant", "1"}});
  CHECK(read({{"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b, tenant=1"},
              {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "tenant=2,x=%3D"}})
            .exporter.headers == std::vector<h>{{"tenant", "2"}, {"x", "="}});
}

TEST_CASE("compression, timeout and the batch settings") {
  auto s = read({{"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"},
                 {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "250"},
                 {"OTEL_BSP_SCHEDULE_DELAY", "100"},
                 {"OTEL_BSP_MAX_QUEUE_SIZE", "100"},
                 {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512"}});
  CHECK(s.exporter.gzip);
  CHECK(s.exporter.timeout == std::chrono::milliseconds(250));
  CHECK(s.batch.schedule_delay == std::chrono::milliseconds(100));
  CHECK(s.batch.max_export_batch_size == 100);  // never more than the queue holds
}

TEST_CASE("bad values stop start-up naming the setting") {
  CHECK(error_of({{"TRACING_EXPORTER_PROTOCOL", "udp"}}).find("TRACING_EXPORTER_PROTOCOL") !=
        std::string::npos);
  CHECK(error_of({{"TRACING_SAMPLING_RATE", "half"}}).find("TRACING_SAMPLING_RATE") != std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}}).find("http/json is not supported") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"}}).find("OTEL_EXPORTER_OTLP_COMPRESSION") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"}}).find("OTEL_EXPORTER_OTLP_TIMEOUT") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_HEADERS", "novalue"}}).find("item 'novalue'") != std::string::npos);
  CHECK(
      error_of({{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=%zz"}}).find("OTEL_EXPORTER_OTLP_TRACES_HEADERS") !=
      std::string::npos);
  // Names and values that HTTP and gRPC cannot carry as they are (gRPC would abort the export call).
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_HEADERS", "a%20b=1"}}).find("header name 'a b'") != std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_HEADERS", "k=a%0D%0Ab"}}).find("printable ASCII") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_HEADERS", "k=%C3%A9"}}).find("printable ASCII") != std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_HEADERS", "k=" + std::string(9000, 'a')}}).find("8192") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://h:1"}}).find("OTEL_EXPORTER_OTLP_ENDPOINT") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:99999"}}).find("OTEL_EXPORTER_OTLP_ENDPOINT") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_EXPORTER_OTLP_CLIENT_KEY", "k.pem"}}).find("CLIENT_CERTIFICATE") !=
        std::string::npos);
  CHECK(error_of({{"OTEL_BSP_MAX_QUEUE_SIZE", "0"}}).find("OTEL_BSP_MAX_QUEUE_SIZE") != std::string::npos);
}

TEST_CASE("OpenTelemetry's own variables win over upstream's TRACING_* when set") {
  auto s = read({{"TRACING_SERVICE_NAME", "envoy-ratelimit"},
                 {"TRACING_SERVICE_NAMESPACE", "gw"},
                 {"OTEL_RESOURCE_ATTRIBUTES",
                  "service.namespace=team%20a,deployment.environment=prod, k8s.pod.name=p-1"},
                 {"OTEL_SERVICE_NAME", "edge-limits"}});
  CHECK(s.resource.service_name == "edge-limits");
  CHECK(s.resource.service_namespace == "team a");
  CHECK(s.resource.service_instance_id.size() == 36);
  REQUIRE(s.resource.attributes.size() == 2);
  CHECK(s.resource.attributes[0] == std::pair<std::string, std::string>("deployment.environment", "prod"));
  CHECK(s.resource.attributes[1] == std::pair<std::string, std::string>("k8s.pod.name", "p-1"));
  // service.name from the attributes when OTEL_SERVICE_NAME is not set; TRACING_* when neither is.
  CHECK(read({{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,service.instance.id=i-7"}})
            .resource.service_name == "from-attrs");
  CHECK(read({{"OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=i-7"}}).resource.service_instance_id ==
        "i-7");
  CHECK(read({{"TRACING_SERVICE_NAME", "envoy-ratelimit"}}).resource.service_name == "envoy-ratelimit");
  CHECK(
      error_of({{"OTEL_RESOURCE_ATTRIBUTES", "novalue"}}).find("OTEL_RESOURCE_ATTRIBUTES: item 'novalue'") !=
      std::string::npos);
  CHECK(error_of({{"OTEL_RESOURCE_ATTRIBUTES", "k=%zz"}}).find("OTEL_RESOURCE_ATTRIBUTES") !=
        std::string::npos);

  // OTEL_SDK_DISABLED turns tracing off whatever TRACING_ENABLED says.
  CHECK_FALSE(read({{"OTEL_SDK_DISABLED", "true"}}).enabled);
  CHECK(read({{"OTEL_SDK_DISABLED", "false"}}).enabled);
}

TEST_CASE("OTEL_TRACES_SAMPLER and its argument, over TRACING_SAMPLING_RATE") {
  auto s = read({{"TRACING_SAMPLING_RATE", "0.3"}});
  CHECK(s.sampler.ratio == 0.3);
  CHECK(s.sampler.parent_based);
  s = read({{"TRACING_SAMPLING_RATE", "0.3"}, {"OTEL_TRACES_SAMPLER", "always_on"}});
  CHECK(s.sampler.ratio == 1.0);
  CHECK_FALSE(s.sampler.parent_based);
  s = read({{"OTEL_TRACES_SAMPLER", "always_off"}});
  CHECK(s.sampler.ratio == 0.0);
  CHECK_FALSE(s.sampler.parent_based);
  s = read({{"OTEL_TRACES_SAMPLER", "traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "0.25"}});
  CHECK(s.sampler.ratio == 0.25);
  CHECK_FALSE(s.sampler.parent_based);
  CHECK(read({{"OTEL_TRACES_SAMPLER", "traceidratio"}}).sampler.ratio == 1.0);
  s = read({{"OTEL_TRACES_SAMPLER", "ParentBased_TraceIdRatio"}, {"OTEL_TRACES_SAMPLER_ARG", "0.5"}});
  CHECK(s.sampler.ratio == 0.5);
  CHECK(s.sampler.parent_based);
  s = read({{"OTEL_TRACES_SAMPLER", "parentbased_always_off"}});
  CHECK(s.sampler.ratio == 0.0);
  CHECK(s.sampler.parent_based);
  CHECK(read({{"OTEL_TRACES_SAMPLER", "parentbased_always_on"}, {"TRACING_SAMPLING_RATE", "0"}})
            .sampler.ratio == 1.0);
  CHECK(
      error_of({{"OTEL_TRACES_SAMPLER", "jaeger_remote"}}).find("OTEL_TRACES_SAMPLER: expected always_on") !=
      std::string::npos);
  CHECK(error_of({{"OTEL_TRACES_SAMPLER", "traceidratio"}, {"OTEL_TRACES_SAMPLER_ARG", "1.5"}})
            .find("OTEL_TRACES_SAMPLER_ARG") != std::string::npos);
}
