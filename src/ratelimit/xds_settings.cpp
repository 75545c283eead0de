#include "ratelimit/xds_settings.hpp"

#include <algorithm>
#include <chrono>

#include "core/read_file.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit {

namespace {

std::string read_pem(const core::env_reader& env, const std::string& name) {
  const auto path = env.get_string(name, "");
  if (path.empty()) return {};
  auto text = core::read_file(path);
  if (!text) throw core::settings_error(core::cat("cannot read '", path, "' for ", name, ": ", text.error()));
  return std::move(*text);
}

// CONFIG_GRPC_XDS_NODE_METADATA: "k1=v1,k2=v2" (upstream's format, not envconfig's map).
std::vector<std::pair<std::string, std::string>> read_node_metadata(const core::env_reader& env) {
  const auto text = env.get_string("CONFIG_GRPC_XDS_NODE_METADATA", "");
  std::vector<std::pair<std::string, std::string>> out;
  if (core::trim_space(text).empty()) return out;
  for (auto item : core::split(text, ',')) {
    const auto eq = item.find('=');
    // Upstream skips such an item without a word; its own comment suggests "key:value", which it then drops.
    if (eq == std::string_view::npos || eq == 0) {
      throw core::settings_error(core::cat("invalid value '", text,
                                           "' for CONFIG_GRPC_XDS_NODE_METADATA: item '", item,
                                           "' is not key=value (expected k1=v1,k2=v2)"));
    }
    out.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
  }
  return out;
}

// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: gRPC metadata, whose names are lower case (grpc-go lowers them).
std::vector<std::pair<std::string, std::string>> read_xds_headers(const core::env_reader& env) {
  auto headers = env.get_map("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS");
  for (auto& [name, value] : headers) {
    name = core::ascii_lower(name);
    const bool name_ok =
        !name.empty() && !name.starts_with("grpc-") &&
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") == std::string::npos;
    const bool value_ok = std::ranges::all_of(value, [](char c) { return c >= 0x20 && c < 0x7f; });
    if (!name_ok || !value_ok) {
      throw core::settings_error(core::cat(
          "invalid value for CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: '", name, "' ",
          name_ok ? "has a value that is not printable ASCII"
                  : "is not a gRPC metadata name (letters, digits, '-', '_', '.', not starting with grpc-)"));
    }
  }
  return headers;
}

}  // namespace

xds::client_settings read_xds_settings(const core::env_reader& env) {
  xds::client_settings x;
  x.node.id = env.get_string("CONFIG_GRPC_XDS_NODE_ID", "default");
  x.node.metadata = read_node_metadata(env);
  x.server_url = env.get_string("CONFIG_GRPC_XDS_SERVER_URL", x.server_url);
  // Read and checked as upstream does; unused there too (its retry interceptor makes no retries).
  env.get_duration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", std::chrono::seconds{3});
  x.headers = read_xds_headers(env);
  x.use_tls = env.get_bool("CONFIG_GRPC_XDS_SERVER_USE_TLS", false);
  x.client_cert_pem = read_pem(env, "CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
  x.client_key_pem = read_pem(env, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
  if (x.client_cert_pem.empty() != x.client_key_pem.empty()) {
    throw core::settings_error(
        "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY must be set together");
  }
  if (auto ca = read_pem(env, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT"); !ca.empty()) {
    // Upstream adds the CA to the system's pool; gRPC takes one list of roots, so the system's come first.
    const auto system_roots = core::read_file("/etc/ssl/certs/ca-certificates.crt");
    x.ca_pem = (system_roots ? *system_roots : std::string()) + "\n" + ca;
  }
  x.server_san = env.get_string("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "");
  auto& b = x.backoff;
  b.initial = std::chrono::duration_cast<std::chrono::milliseconds>(
      env.get_duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", std::chrono::seconds{10}));
  b.max = std::chrono::duration_cast<std::chrono::milliseconds>(
      env.get_duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", std::chrono::seconds{60}));
  if (b.initial.count() <= 0 || b.max < b.initial) {
    throw core::settings_error(core::cat("invalid XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (", b.initial.count(),
                                         " ms) and XDS_CLIENT_BACKOFF_MAX_INTERVAL (", b.max.count(),
                                         " ms): expected 0 < initial <= max"));
  }
  b.random_factor = env.get_double("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", 0.5, 0.0, 1.0);
  b.jitter = env.get_bool("XDS_CLIENT_BACKOFF_JITTER", true);
  x.max_receive_bytes = env.get_uint("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", 0, 0, 2'147'483'647);
  return x;
}

}  // namespace sluice::ratelimit
