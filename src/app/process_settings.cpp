#include "process_settings.hpp"

#include <limits>

#include "core/open_files.hpp"
#include "core/strings.hpp"
#include "core/workers.hpp"

namespace sluice {

namespace {

std::chrono::milliseconds to_ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

void read_http(const core::env_reader& env, net::http::server_options& s) {
  s.host = env.get_string("HOST", "0.0.0.0");
  s.port = static_cast<std::uint16_t>(env.get_uint("PORT", 8080, 0, 65535));
  s.max_header_bytes = env.get_uint("HTTP_MAX_HEADER_BYTES", s.max_header_bytes, 1024, 1 << 20);
  s.max_body_bytes = env.get_uint("HTTP_MAX_BODY_BYTES", s.max_body_bytes, 1024, 64 << 20);
  s.idle_timeout = to_ms(env.get_duration("HTTP_IDLE_TIMEOUT", s.idle_timeout));
  s.read_timeout = to_ms(env.get_duration("HTTP_READ_TIMEOUT", s.read_timeout));
  s.tls_cert_file = env.get_string("HTTP_SERVER_TLS_CERT", "");
  s.tls_key_file = env.get_string("HTTP_SERVER_TLS_KEY", "");
  if (s.tls_cert_file.empty() != s.tls_key_file.empty())
    throw core::settings_error("HTTP_SERVER_TLS_CERT and HTTP_SERVER_TLS_KEY must be set together");
}

void read_grpc(const core::env_reader& env, net::grpc::server_options& s) {
  s.host = env.get_string("GRPC_HOST", "0.0.0.0");
  s.port = static_cast<std::uint16_t>(env.get_uint("GRPC_PORT", 8081, 0, 65535));
  s.unix_socket = env.get_string("GRPC_UDS", "");
  s.max_connection_age = to_ms(env.get_duration("GRPC_MAX_CONNECTION_AGE", s.max_connection_age));
  s.max_connection_age_grace =
      to_ms(env.get_duration("GRPC_MAX_CONNECTION_AGE_GRACE", s.max_connection_age_grace));
  s.max_concurrent_streams = static_cast<std::uint32_t>(
      env.get_uint("GRPC_MAX_CONCURRENT_STREAMS", s.max_concurrent_streams, 1, 1 << 20));
  s.max_recv_message_bytes =
      env.get_uint("GRPC_MAX_RECV_MESSAGE_BYTES", s.max_recv_message_bytes, 1024, std::uint64_t{1} << 30);
  s.use_tls = env.get_bool("GRPC_SERVER_USE_TLS", false);
  s.tls.cert_file = env.get_string("GRPC_SERVER_TLS_CERT", "");
  s.tls.key_file = env.get_string("GRPC_SERVER_TLS_KEY", "");
  s.tls.client_ca_file = env.get_string("GRPC_CLIENT_TLS_CACERT", "");
  s.tls.client_san = env.get_string("GRPC_CLIENT_TLS_SAN", "");
  if (!s.use_tls) return;
  if (s.tls.cert_file.empty() || s.tls.key_file.empty())
    throw core::settings_error("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
  if (!s.tls.client_san.empty() && s.tls.client_ca_file.empty())
    throw core::settings_error(
        "GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT (it checks client certificates)");
}

std::uint64_t read_max_connections(const core::env_reader& env, std::uint64_t open_file_limit) {
  const auto most = core::default_max_connections(open_file_limit);
  const auto n = env.get_uint("MAX_CONNECTIONS", most, 1, std::numeric_limits<std::uint32_t>::max());
  if (n > most) {
    throw core::settings_error(
        core::cat("MAX_CONNECTIONS=", n, " is more than the open file limit allows: at most ", most,
                  " (RLIMIT_NOFILE ", open_file_limit, " less ", core::reserved_descriptors(open_file_limit),
                  " descriptors kept for backends, listeners and files)"));
  }
  return n;
}

}  // namespace

process_settings read_process_settings(const core::env_reader& env, std::uint64_t open_file_limit) {
  process_settings s;
  auto level_text = env.get_string("LOG_LEVEL", "warn");
  auto level = core::parse_log_level(level_text);
  if (!level) {
    throw core::settings_error(
        core::cat("invalid value '", level_text,
                  "' for LOG_LEVEL: expected panic, fatal, error, warn, info, debug or trace"));
  }
  s.log_level = *level;
  s.log_json = env.get_choice("LOG_FORMAT", "text", {"text", "json"}, true) == "json";
  s.io_threads = static_cast<unsigned>(env.get_uint("IO_THREADS", core::usable_cpus(), 1, 1024));
  read_http(env, s.http);
  read_grpc(env, s.grpc);
  s.reflection = env.get_bool("REFLECTION_ENABLED", true);
  s.shutdown_grace = to_ms(env.get_duration("SHUTDOWN_GRACE_PERIOD", s.shutdown_grace));
  s.max_connections = read_max_connections(env, open_file_limit);
  s.debug.host = env.get_string("DEBUG_HOST", "0.0.0.0");
  s.debug.port = static_cast<std::uint16_t>(env.get_uint("DEBUG_PORT", 6070, 0, 65535));
  const std::string allowed_hosts = env.get_string("DEBUG_ALLOWED_HOSTS", "");
  for (auto name : core::split(allowed_hosts, ',')) {
    name = core::trim_space(name);
    if (name.empty()) continue;
    if (name.find_first_of(" /:@") != std::string_view::npos)
      throw core::settings_error(
          core::cat("DEBUG_ALLOWED_HOSTS: '", name,
                    "' is not a host name (give names without ports, comma-separated)"));
    s.debug_allowed_hosts.emplace_back(name);
  }
  s.admin_token_file = env.get_string("ADMIN_TOKEN_FILE", "");
  return s;
}

}  // namespace sluice
