#include "process_settings.hpp"

#include <limits>

#include "core/open_files.hpp"
#include "core/strings.hpp"
#include "core/workers.hpp"

namespace sluice {

namespace {

using core::setting;
constexpr setting host{"HOST", "text", "0.0.0.0", "HTTP bind address (/json, /healthcheck)"};
constexpr setting port{"PORT", "whole number", "8080", "HTTP port"};
constexpr setting http_max_header_bytes{"HTTP_MAX_HEADER_BYTES", "whole number", "8192",
                                        "larger request headers get 431"};
constexpr setting http_max_body_bytes{"HTTP_MAX_BODY_BYTES", "whole number", "1048576",
                                      "larger request bodies get 413"};
constexpr setting http_idle_timeout{"HTTP_IDLE_TIMEOUT", "duration", "60s",
                                    "a kept-alive connection idle this long is closed"};
constexpr setting http_read_timeout{"HTTP_READ_TIMEOUT", "duration", "10s",
                                    "a started request must arrive whole within this time"};
constexpr setting http_tls_cert{"HTTP_SERVER_TLS_CERT", "path", "",
                                "the HTTP listener speaks only TLS with this certificate (and its key)"};
constexpr setting http_tls_key{"HTTP_SERVER_TLS_KEY", "path", "", "the key of HTTP_SERVER_TLS_CERT"};
constexpr setting grpc_host{"GRPC_HOST", "text", "0.0.0.0", "gRPC bind address"};
constexpr setting grpc_port{"GRPC_PORT", "whole number", "8081", "gRPC port"};
constexpr setting grpc_uds{"GRPC_UDS", "path", "", "gRPC listens on this unix socket instead"};
constexpr setting grpc_max_age{"GRPC_MAX_CONNECTION_AGE", "duration", "24h",
                               "a client connection older than this gets a GOAWAY; 0: no limit"};
constexpr setting grpc_max_age_grace{"GRPC_MAX_CONNECTION_AGE_GRACE", "duration", "1h",
                                     "after that GOAWAY, how long open calls may take"};
constexpr setting grpc_max_streams{"GRPC_MAX_CONCURRENT_STREAMS", "whole number", "1024",
                                   "calls open at once on one connection"};
constexpr setting grpc_max_message{"GRPC_MAX_RECV_MESSAGE_BYTES", "whole number", "4194304",
                                   "largest request message; larger ones fail RESOURCE_EXHAUSTED"};
constexpr setting grpc_use_tls{"GRPC_SERVER_USE_TLS", "bool", "false",
                               "the gRPC listener speaks only TLS (needs GRPC_SERVER_TLS_CERT and _KEY)"};
constexpr setting grpc_tls_cert{"GRPC_SERVER_TLS_CERT", "path", "", "the gRPC listener's certificate"};
constexpr setting grpc_tls_key{"GRPC_SERVER_TLS_KEY", "path", "", "the key of GRPC_SERVER_TLS_CERT"};
constexpr setting grpc_client_ca{"GRPC_CLIENT_TLS_CACERT", "path", "",
                                 "mutual TLS: clients must present a certificate this CA signed"};
constexpr setting grpc_client_san{"GRPC_CLIENT_TLS_SAN", "text", "",
                                  "with GRPC_CLIENT_TLS_CACERT: the DNS name client certificates must carry"};
constexpr setting max_connections{"MAX_CONNECTIONS", "whole number", "(the open file limit less a reserve)",
                                  "client connections open at once on the HTTP and gRPC listeners together"};
constexpr setting log_format{"LOG_FORMAT", "text|json", "text", "the log lines' format"};
constexpr setting io_threads{"IO_THREADS", "whole number", "(the CPUs this process may use)",
                             "worker threads"};
constexpr setting reflection{"REFLECTION_ENABLED", "bool", "true",
                             "gRPC server reflection on the gRPC listener"};
constexpr setting shutdown_grace{"SHUTDOWN_GRACE_PERIOD", "duration", "10s",
                                 "on SIGTERM, how long calls in flight may take"};
constexpr setting debug_host{"DEBUG_HOST", "text", "0.0.0.0", "debug server bind address"};
constexpr setting debug_port{"DEBUG_PORT", "whole number", "6070", "debug server port"};
constexpr setting debug_allowed_hosts{"DEBUG_ALLOWED_HOSTS", "list", "",
                                      "host names the debug server accepts in Host, besides addresses and "
                                      "localhost"};
constexpr setting admin_token_file{"ADMIN_TOKEN_FILE", "path", "",
                                   "bearer tokens that may change counters on the debug server, one a line"};
constexpr setting all[]{core::log_level_setting,
                        log_format,
                        io_threads,
                        host,
                        port,
                        http_max_header_bytes,
                        http_max_body_bytes,
                        http_idle_timeout,
                        http_read_timeout,
                        http_tls_cert,
                        http_tls_key,
                        grpc_host,
                        grpc_port,
                        grpc_uds,
                        grpc_max_age,
                        grpc_max_age_grace,
                        grpc_max_streams,
                        grpc_max_message,
                        grpc_use_tls,
                        grpc_tls_cert,
                        grpc_tls_key,
                        grpc_client_ca,
                        grpc_client_san,
                        max_connections,
                        reflection,
                        shutdown_grace,
                        debug_host,
                        debug_port,
                        debug_allowed_hosts,
                        admin_token_file};

std::chrono::milliseconds to_ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

void read_http(const core::env_reader& env, net::http::server_options& s) {
  s.host = env.get_string(host);
  s.port = static_cast<std::uint16_t>(env.get_uint(port, 0, 65535));
  s.max_header_bytes = env.get_uint(http_max_header_bytes, 1024, 1 << 20);
  s.max_body_bytes = env.get_uint(http_max_body_bytes, 1024, 64 << 20);
  s.idle_timeout = to_ms(env.get_duration(http_idle_timeout));
  s.read_timeout = to_ms(env.get_duration(http_read_timeout));
  s.tls_cert_file = env.get_string(http_tls_cert);
  s.tls_key_file = env.get_string(http_tls_key);
  if (s.tls_cert_file.empty() != s.tls_key_file.empty())
    throw core::settings_error("HTTP_SERVER_TLS_CERT and HTTP_SERVER_TLS_KEY must be set together");
}

void read_grpc(const core::env_reader& env, net::grpc::server_options& s) {
  s.host = env.get_string(grpc_host);
  s.port = static_cast<std::uint16_t>(env.get_uint(grpc_port, 0, 65535));
  s.unix_socket = env.get_string(grpc_uds);
  s.max_connection_age = to_ms(env.get_duration(grpc_max_age));
  s.max_connection_age_grace = to_ms(env.get_duration(grpc_max_age_grace));
  s.max_concurrent_streams = static_cast<std::uint32_t>(env.get_uint(grpc_max_streams, 1, 1 << 20));
  s.max_recv_message_bytes = env.get_uint(grpc_max_message, 1024, std::uint64_t{1} << 30);
  s.use_tls = env.get_bool(grpc_use_tls);
  s.tls.cert_file = env.get_string(grpc_tls_cert);
  s.tls.key_file = env.get_string(grpc_tls_key);
  s.tls.client_ca_file = env.get_string(grpc_client_ca);
  s.tls.client_san = env.get_string(grpc_client_san);
  if (!s.use_tls) return;
  if (s.tls.cert_file.empty() || s.tls.key_file.empty())
    throw core::settings_error("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  if (!s.tls.client_san.empty() && s.tls.client_ca_file.empty())
    throw core::settings_error(
        "GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT (it checks client certificates)");
}

std::uint64_t read_max_connections(const core::env_reader& env, std::uint64_t open_file_limit) {
  const auto most = core::default_max_connections(open_file_limit);
  const auto n = env.get_uint(max_connections, most, 1, std::numeric_limits<std::uint32_t>::max());
  if (n > most) {
    throw core::settings_error(
        core::cat("MAX_CONNECTIONS=", n, " is more than the open file limit allows: at most ", most,
                  " (RLIMIT_NOFILE ", open_file_limit, " less ", core::reserved_descriptors(open_file_limit),
                  " descriptors kept for backends, listeners and files)"));
  }
  return n;
}

}  // namespace

std::span<const core::setting> process_settings_list() {
  return all;
}

process_settings read_process_settings(const core::env_reader& env, std::uint64_t open_file_limit) {
  process_settings s;
  auto level_text = env.get_string(core::log_level_setting);
  auto level = core::parse_log_level(level_text);
  if (!level) {
    throw core::settings_error(
        core::cat("invalid value '", level_text,
                  "' for LOG_LEVEL: expected panic, fatal, error, warn, info, debug or trace"));
  }
  s.log_level = *level;
  s.log_json = env.get_choice(log_format, true) == "json";
  s.io_threads = static_cast<unsigned>(env.get_uint(io_threads, core::usable_cpus(), 1, 1024));
  read_http(env, s.http);
  read_grpc(env, s.grpc);
  s.reflection = env.get_bool(reflection);
  s.shutdown_grace = to_ms(env.get_duration(shutdown_grace));
  s.max_connections = read_max_connections(env, open_file_limit);
  s.debug.host = env.get_string(debug_host);
  s.debug.port = static_cast<std::uint16_t>(env.get_uint(debug_port, 0, 65535));
  const std::string allowed_hosts = env.get_string(debug_allowed_hosts);
  for (auto name : core::split(allowed_hosts, ',')) {
    name = core::trim_space(name);
    if (name.empty()) continue;
    if (name.find_first_of(" /:@") != std::string_view::npos)
      throw core::settings_error(
          core::cat("DEBUG_ALLOWED_HOSTS: '", name,
                    "' is not a host name (give names without ports, comma-separated)"));
    s.debug_allowed_hosts.emplace_back(name);
  }
  s.admin_token_file = env.get_string(admin_token_file);
  return s;
}

}  // namespace sluice
