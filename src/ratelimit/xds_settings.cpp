#include "ratelimit/xds_settings.hpp"

#include <algorithm>
#include <chrono>

#include "core/read_file.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit {

namespace {

// (A namespace of their own: the library is built as one unit with the other settings files.)
namespace xds_env {

using core::setting;
constexpr setting node_id{"CONFIG_GRPC_XDS_NODE_ID", "text", "default",
                          "xDS: the node id sent in every request"};
constexpr setting node_metadata{"CONFIG_GRPC_XDS_NODE_METADATA", "k1=v1,k2=v2", "",
                                "xDS: the node's metadata"};
constexpr setting server_url{"CONFIG_GRPC_XDS_SERVER_URL", "text", "localhost:18000",
                             "xDS: the management server, a gRPC target"};
constexpr setting retry_interval{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "duration", "3s",
                                 "xDS: accepted and checked; unused, as upstream"};
constexpr setting additional_headers{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "map", "",
                                     "xDS: gRPC metadata on the stream, name1:value1,..."};
constexpr setting use_tls{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "bool", "false", "xDS: TLS to the server"};
constexpr setting client_cert{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "path", "",
                              "xDS: client certificate for mutual TLS, with its key"};
constexpr setting client_key{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "path", "",
                             "xDS: the client certificate's key"};
constexpr setting server_ca{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "path", "",
                            "xDS: CA file for the server's certificate, beside the system's"};
constexpr setting server_san{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "text", "",
                             "xDS: the name the server's certificate must carry"};
constexpr setting backoff_initial{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "duration", "10s",
                                  "xDS: the wait before the first new attempt after a stream ended"};
constexpr setting backoff_max{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "duration", "60s", "xDS: the longest wait"};
constexpr setting backoff_factor{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "number", "0.5",
                                 "xDS: with jitter, each wait is spread by this fraction of itself"};
constexpr setting backoff_jitter{"XDS_CLIENT_BACKOFF_JITTER", "bool", "true", "xDS: spread the waits"};
constexpr setting max_message{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "whole number", "0",
                              "xDS: the largest response accepted; 0: gRPC's 4 MiB"};
constexpr setting all[]{node_id,         node_metadata, server_url,     retry_interval, additional_headers,
                        use_tls,         client_cert,   client_key,     server_ca,      server_san,
                        backoff_initial, backoff_max,   backoff_factor, backoff_jitter, max_message};

}  // namespace xds_env

std::string read_pem(const core::env_reader& env, const core::setting& s) {
  const auto path = env.get_string(s);
  if (path.empty()) return {};
  auto text = core::read_file(path);
  if (!text)
    throw core::settings_error(core::cat("cannot read '", path, "' for ", s.name, ": ", text.error()));
  return std::move(*text);
}

// CONFIG_GRPC_XDS_NODE_METADATA: "k1=v1,k2=v2" (upstream's format, not envconfig's map).
std::vector<std::pair<std::string, std::string>> read_node_metadata(const core::env_reader& env) {
  using namespace xds_env;
  const auto text = env.get_string(node_metadata);
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
  using namespace xds_env;
  auto headers = env.get_map(additional_headers);
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

std::span<const core::setting> xds_settings() {
  using namespace xds_env;
  return all;
}

xds::client_settings read_xds_settings(const core::env_reader& env) {
  using namespace xds_env;
  xds::client_settings x;
  x.node.id = env.get_string(node_id);
  x.node.metadata = read_node_metadata(env);
  x.server_url = env.get_string(server_url);
  // Read and checked as upstream does; unused there too (its retry interceptor makes no retries).
  env.get_duration(retry_interval);
  x.headers = read_xds_headers(env);
  x.use_tls = env.get_bool(use_tls);
  x.client_cert_pem = read_pem(env, client_cert);
  x.client_key_pem = read_pem(env, client_key);
  if (x.client_cert_pem.empty() != x.client_key_pem.empty()) {
    throw core::settings_error(
        "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY must be set together");
  }
  if (auto ca = read_pem(env, server_ca); !ca.empty()) {
    // Upstream adds the CA to the system's pool; gRPC takes one list of roots, so the system's come first.
    const auto system_roots = core::read_file("/etc/ssl/certs/ca-certificates.crt");
    x.ca_pem = (system_roots ? *system_roots : std::string()) + "\n" + ca;
  }
  x.server_san = env.get_string(server_san);
  auto& b = x.backoff;
  b.initial = std::chrono::duration_cast<std::chrono::milliseconds>(env.get_duration(backoff_initial));
  b.max = std::chrono::duration_cast<std::chrono::milliseconds>(env.get_duration(backoff_max));
  if (b.initial.count() <= 0 || b.max < b.initial) {
    throw core::settings_error(core::cat("invalid XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (", b.initial.count(),
                                         " ms) and XDS_CLIENT_BACKOFF_MAX_INTERVAL (", b.max.count(),
                                         " ms): expected 0 < initial <= max"));
  }
  b.random_factor = env.get_double(backoff_factor, 0.0, 1.0);
  b.jitter = env.get_bool(backoff_jitter);
  x.max_receive_bytes = env.get_uint(max_message, 0, 2'147'483'647);
  return x;
}

}  // namespace sluice::ratelimit
