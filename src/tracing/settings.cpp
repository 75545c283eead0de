#include "tracing/settings.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <random>

#include "core/strings.hpp"

namespace sluice::tracing {

namespace {

using core::cat;
using core::setting;
using core::settings_error;

// OTEL_EXPORTER_OTLP_<...>, and OTEL_EXPORTER_OTLP_TRACES_<...> over them.
constexpr setting otlp[]{
    {"OTEL_EXPORTER_OTLP_ENDPOINT", "URL", "(http://localhost:4318; http://localhost:4317 for grpc)",
     "the OTLP collector; with http/protobuf a base under which /v1/traces is posted"},
    {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf|grpc", "http/protobuf", "the OTLP transport"},
    {"OTEL_EXPORTER_OTLP_INSECURE", "bool", "false", "grpc without a scheme: plain text instead of TLS"},
    {"OTEL_EXPORTER_OTLP_CERTIFICATE", "path", "", "CAs trusted for the collector's certificate"},
    {"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "path", "", "client certificate for mutual TLS, with its key"},
    {"OTEL_EXPORTER_OTLP_CLIENT_KEY", "path", "", "the client certificate's key"},
    {"OTEL_EXPORTER_OTLP_HEADERS", "list", "", "headers on every export, name=value,..."},
    {"OTEL_EXPORTER_OTLP_TIMEOUT", "whole number", "10000", "an export's timeout, in milliseconds"},
    {"OTEL_EXPORTER_OTLP_COMPRESSION", "gzip|none", "none", "the exports' compression"},
};
constexpr setting exporter_protocol{
    "TRACING_EXPORTER_PROTOCOL", "http|grpc", "",
    "the OTLP transport (upstream's name; wins over OTEL_EXPORTER_OTLP_PROTOCOL)"};
constexpr setting bsp_schedule_delay{"OTEL_BSP_SCHEDULE_DELAY", "whole number", "5000",
                                     "milliseconds between two exports of spans"};
constexpr setting bsp_max_queue{"OTEL_BSP_MAX_QUEUE_SIZE", "whole number", "2048",
                                "spans waiting for export at most; more are dropped"};
constexpr setting bsp_max_batch{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "whole number", "512", "spans per export"};
constexpr setting bsp_export_timeout{"OTEL_BSP_EXPORT_TIMEOUT", "whole number", "30000",
                                     "milliseconds an export may take"};
constexpr setting service_name{"TRACING_SERVICE_NAME", "text", "RateLimit", "the traces' service.name"};
constexpr setting service_namespace{"TRACING_SERVICE_NAMESPACE", "text", "", "the traces' service.namespace"};
constexpr setting service_instance_id{"TRACING_SERVICE_INSTANCE_ID", "text", "",
                                      "the traces' service.instance.id; empty: a random UUID"};
constexpr setting resource_attributes{"OTEL_RESOURCE_ATTRIBUTES", "list", "",
                                      "key=value,... resource attributes, over the three above"};
constexpr setting otel_service_name{"OTEL_SERVICE_NAME", "text", "", "service.name, over everything else"};
constexpr setting sampling_rate{"TRACING_SAMPLING_RATE", "number", "1", "the share of traces sampled"};
constexpr setting sampler{"OTEL_TRACES_SAMPLER", "text", "",
                          "always_on, always_off, traceidratio, or parentbased_ one of them"};
constexpr setting sampler_arg{"OTEL_TRACES_SAMPLER_ARG", "number", "1", "traceidratio's ratio (0 to 1)"};
constexpr setting tracing_enabled{"TRACING_ENABLED", "bool", "false", "export traces over OTLP"};
constexpr setting sdk_disabled{"OTEL_SDK_DISABLED", "bool", "false", "no traces, whatever TRACING_ENABLED"};
constexpr setting others[]{
    tracing_enabled,     sdk_disabled,        exporter_protocol, service_name,  service_namespace,
    service_instance_id, resource_attributes, otel_service_name, sampling_rate, sampler,
    sampler_arg,         bsp_schedule_delay,  bsp_max_queue,     bsp_max_batch, bsp_export_timeout};

const core::setting_family& otlp_family() {
  static const core::setting_family family(
      otlp, "OTEL_EXPORTER_OTLP_",
      {{"OTEL_EXPORTER_OTLP_TRACES_", "traces (over the general one): ", {}, "(the general one's)"}});
  return family;
}

// The per-signal variable when set, else the general one; `used` is the one read.
std::string otlp_value(const core::env_reader& env, std::string_view suffix, const setting*& used) {
  used = &otlp_family().at("OTEL_EXPORTER_OTLP_TRACES_", suffix);
  auto value = env.get_string(*used);  // (its default is the general one's: empty here)
  if (!value.empty()) return value;
  used = &otlp_family().at("OTEL_EXPORTER_OTLP_", suffix);
  return env.get_string(std::string(used->name), "");
}

struct parsed_url {
  std::string scheme;  // lower case; empty when there is none
  std::string host;
  std::string port;
  std::string path;
};

// "scheme://host[:port][/path]" or, without a scheme, "host[:port]"; IPv6 hosts in brackets.
parsed_url parse_url(const std::string& name, std::string_view url) {
  parsed_url out;
  std::string_view rest = url;
  if (auto at = rest.find("://"); at != std::string_view::npos) {
    out.scheme = core::ascii_lower(rest.substr(0, at));
    rest.remove_prefix(at + 3);
  }
  auto slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) out.path = std::string(rest.substr(slash));
  if (auto q = out.path.find_first_of("?#"); q != std::string::npos) out.path.resize(q);
  const auto [host, port_text] = core::split_host_port(authority);
  out.host = host;
  out.port = port_text;
  std::uint16_t port = 0;
  if (out.host.empty() || (!out.port.empty() && (!core::parse_unsigned(out.port, port) || port == 0)))
    throw settings_error(
        cat("invalid value '", url, "' for ", name, ": expected a URL such as http://host:4318"));
  return out;
}

// Go's path.Join(base, "/v1/traces") for the paths an endpoint has: the signal's path under the base's.
std::string join_traces_path(std::string base) {
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/v1/traces";
}

export_protocol read_protocol(const core::env_reader& env) {
  auto own = core::ascii_lower(env.get_string(exporter_protocol));
  if (own == "http") return export_protocol::http;
  if (own == "grpc") return export_protocol::grpc;
  if (!own.empty()) {
    throw settings_error(cat("invalid value '", env.get_string(exporter_protocol),
                             "' for TRACING_EXPORTER_PROTOCOL: expected http or grpc"));
  }
  const setting* used = nullptr;
  auto standard = otlp_value(env, "PROTOCOL", used);
  if (standard.empty() || standard == "http/protobuf") return export_protocol::http;
  if (standard == "grpc") return export_protocol::grpc;
  throw settings_error(cat("invalid value '", standard, "' for ", used->name,
                           ": expected grpc or http/protobuf (http/json is not supported)"));
}

void read_endpoint(const core::env_reader& env, exporter_settings& out) {
  const bool http = out.protocol == export_protocol::http;
  const setting* endpoint = nullptr;
  auto url = otlp_value(env, "ENDPOINT", endpoint);
  const bool per_signal = endpoint->name.starts_with("OTEL_EXPORTER_OTLP_TRACES_");
  if (url.empty()) url = http ? "http://localhost:4318" : "http://localhost:4317";
  const std::string name(endpoint->name);
  auto parsed = parse_url(name, url);
  const setting* insecure = nullptr;
  auto insecure_text = otlp_value(env, "INSECURE", insecure);
  if (parsed.scheme == "https") {
    out.tls = true;
  } else if (parsed.scheme == "http") {
    out.tls = false;
  } else if (http || !parsed.scheme.empty()) {
    throw settings_error(
        cat("invalid value '", url, "' for ", name, ": expected an http:// or https:// URL"));
  } else {
    // gRPC without a scheme: TLS unless INSECURE says otherwise (the OTLP exporter specification).
    out.tls = !(insecure_text.empty() ? false : env.get_bool(std::string(insecure->name), false));
  }
  out.host = parsed.host;
  // Without a port, the scheme's (gRPC dials a bare host at 443, as Go's exporter does).
  out.port = !parsed.port.empty() ? parsed.port : out.tls ? "443" : "80";
  if (http) {
    // The per-signal URL is used as it is (its root when it has no path); the general one is a base.
    out.path = per_signal ? (parsed.path.empty() ? "/" : parsed.path) : join_traces_path(parsed.path);
    out.endpoint = cat(out.tls ? "https://" : "http://", core::host_port(out.host, out.port), out.path);
  } else {
    out.path.clear();
    out.endpoint = core::host_port(out.host, out.port);
  }
}

exporter_settings read_exporter(const core::env_reader& env) {
  exporter_settings out;
  out.protocol = read_protocol(env);
  read_endpoint(env, out);
  const setting* used = nullptr;
  out.ca_file = otlp_value(env, "CERTIFICATE", used);
  out.client_cert_file = otlp_value(env, "CLIENT_CERTIFICATE", used);
  out.client_key_file = otlp_value(env, "CLIENT_KEY", used);
  if (out.client_cert_file.empty() != out.client_key_file.empty()) {
    throw settings_error(
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY must be set together");
  }
  // The per-signal list, when set, replaces the general one (as Go's exporters read them).
  auto headers = otlp_value(env, "HEADERS", used);
  out.headers = parse_header_list(std::string(used->name), headers);
  auto timeout = otlp_value(env, "TIMEOUT", used);
  if (!timeout.empty())
    out.timeout = std::chrono::milliseconds(env.get_uint(std::string(used->name), 10000, 1, 3'600'000));
  auto compression = core::ascii_lower(otlp_value(env, "COMPRESSION", used));
  if (compression == "gzip") {
    out.gzip = true;
  } else if (!compression.empty() && compression != "none") {
    throw settings_error(
        cat("invalid value '", compression, "' for ", used->name, ": expected gzip or none"));
  }
  return out;
}

batch_settings read_batch(const core::env_reader& env) {
  batch_settings out;
  out.schedule_delay = std::chrono::milliseconds(env.get_uint(bsp_schedule_delay, 1, 3'600'000));
  // The queues' room is reserved (a push on a worker never allocates): at most 64 Ki spans, ~13 MB.
  out.max_queue_size = env.get_uint(bsp_max_queue, 1, 65536);
  out.max_export_batch_size = env.get_uint(bsp_max_batch, 1, 1'000'000);
  // As OpenTelemetry's batch span processor: a batch is never larger than the queue.
  out.max_export_batch_size = std::min(out.max_export_batch_size, out.max_queue_size);
  out.export_timeout = std::chrono::milliseconds(env.get_uint(bsp_export_timeout, 1, 3'600'000));
  return out;
}

}  // namespace

namespace {

constexpr std::size_t max_header_value = 8192;

bool header_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
}
bool header_value_char(char c) {
  return c >= 0x20 && c <= 0x7e;
}

// "k1=v1,k2=v2", values (and keys when `decode_keys`) percent-decoded; throws naming `name` for an item
// without
// '=', an empty key or a bad escape.
std::vector<std::pair<std::string, std::string>> split_pairs(const std::string& name, const std::string& text,
                                                             bool decode_keys) {
  std::vector<std::pair<std::string, std::string>> out;
  if (core::trim_space(text).empty()) return out;
  for (auto item : core::split(text, ',')) {
    const auto eq = item.find('=');
    bool malformed = eq == std::string_view::npos;
    std::string key, value;
    if (!malformed) {
      const auto raw_key = core::trim_space(item.substr(0, eq));
      key = decode_keys ? core::percent_decode(raw_key, &malformed) : std::string(raw_key);
      value = core::percent_decode(core::trim_space(item.substr(eq + 1)), &malformed);
    }
    if (malformed || key.empty()) {
      throw settings_error(cat("invalid value '", text, "' for ", name, ": item '", core::trim_space(item),
                               "' is not key=value (expected k1=v1,k2=v2 with %XX escapes)"));
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_header_list(const std::string& name,
                                                                   const std::string& text) {
  auto out = split_pairs(name, text, true);
  for (const auto& [key, value] : out) {
    // What both HTTP and gRPC carry as they are (gRPC aborts a call whose metadata is outside these).
    if (!std::all_of(key.begin(), key.end(), header_name_char)) {
      throw settings_error(cat("invalid value '", text, "' for ", name, ": header name '", key,
                               "' may hold only letters, digits, '-', '_' and '.'"));
    }
    if (value.size() > max_header_value || !std::all_of(value.begin(), value.end(), header_value_char)) {
      throw settings_error(cat("invalid value '", text, "' for ", name, ": the value of header '", key,
                               "' must be printable ASCII of at most ", max_header_value, " bytes"));
    }
  }
  return out;
}

std::string random_uuid_v4() {
  std::random_device device;
  std::array<std::uint8_t, 16> b{};
  for (std::size_t i = 0; i < b.size(); i += 4) {
    const auto r = device();
    for (std::size_t j = 0; j < 4; ++j) b[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
  }
  b[6] = static_cast<std::uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<std::uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof text, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return text;
}

std::vector<std::pair<std::string, std::string>> parse_resource_attributes(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  // (keys are not escaped in this list; values are)
  for (auto& pair : split_pairs("OTEL_RESOURCE_ATTRIBUTES", text, false)) {
    // A key given twice: the last one counts (as the OpenTelemetry SDKs merge them).
    std::erase_if(out, [&pair](const auto& kv) { return kv.first == pair.first; });
    out.push_back(std::move(pair));
  }
  return out;
}

namespace {

// upstream's resource from TRACING_*, then OTEL_RESOURCE_ATTRIBUTES, then OTEL_SERVICE_NAME over them.
resource_info read_resource(const core::env_reader& env) {
  resource_info r;
  r.service_name = env.get_string(service_name);
  r.service_namespace = env.get_string(service_namespace);
  r.service_instance_id = env.get_string(service_instance_id);
  for (auto& [key, value] : parse_resource_attributes(env.get_string(resource_attributes))) {
    if (key == "service.name") {
      r.service_name = std::move(value);
    } else if (key == "service.namespace") {
      r.service_namespace = std::move(value);
    } else if (key == "service.instance.id") {
      r.service_instance_id = std::move(value);
    } else {
      r.attributes.emplace_back(std::move(key), std::move(value));
    }
  }
  if (auto name = env.get_string(otel_service_name); !name.empty()) r.service_name = std::move(name);
  if (r.service_instance_id.empty()) r.service_instance_id = random_uuid_v4();
  return r;
}

sampler_settings read_sampler(const core::env_reader& env) {
  sampler_settings out;
  out.ratio = env.get_double(sampling_rate, -1e300, 1e300);
  const auto name = core::ascii_lower(core::trim_space(env.get_string(sampler)));
  if (name.empty()) return out;
  out.name = name;
  out.parent_based = name.starts_with("parentbased_");
  const std::string_view root = out.parent_based ? std::string_view(name).substr(12) : std::string_view(name);
  if (root == "always_on") {
    out.ratio = 1.0;
  } else if (root == "always_off") {
    out.ratio = 0.0;
  } else if (root == "traceidratio") {
    out.ratio = 1.0;  // the specification's default argument
    const auto arg = env.get_string(sampler_arg);
    if (!arg.empty()) out.ratio = env.get_double(sampler_arg, 0.0, 1.0);
  } else {
    throw settings_error(cat("invalid value '", env.get_string(sampler),
                             "' for OTEL_TRACES_SAMPLER: expected always_on, always_off, traceidratio, "
                             "parentbased_always_on, parentbased_always_off or parentbased_traceidratio"));
  }
  return out;
}

}  // namespace

std::vector<core::setting> tracing_settings() {
  std::vector<core::setting> out(std::begin(others), std::end(others));
  out.insert(out.end(), otlp_family().all().begin(), otlp_family().all().end());
  return out;
}

settings read_settings(const core::env_reader& env) {
  settings out;
  out.enabled = env.get_bool(tracing_enabled) && !env.get_bool(sdk_disabled);
  if (!out.enabled) return out;
  out.resource = read_resource(env);
  out.sampler = read_sampler(env);
  out.exporter = read_exporter(env);
  out.batch = read_batch(env);
  return out;
}

}  // namespace sluice::tracing
