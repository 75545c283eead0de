#pragma once
// Part of the composition root: the process-wide settings (logging, workers, the HTTP, gRPC and debug
// listeners, shutdown), read once from the environment. Anything invalid throws core::settings_error naming
// the variable.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/env.hpp"
#include "core/log.hpp"
#include "net/grpc/server.hpp"
#include "net/http/server.hpp"

namespace sluice {

struct process_settings {
  core::log_level log_level = core::log_level::warn;
  bool log_json = false;
  unsigned io_threads = 1;  // IO_THREADS: default, the CPUs this process may use
  net::http::server_options http;
  net::http::server_options debug;
  std::vector<std::string>
      debug_allowed_hosts;       // DEBUG_ALLOWED_HOSTS: names the debug listener accepts in Host
  std::string admin_token_file;  // ADMIN_TOKEN_FILE: tokens that may change counters
  net::grpc::server_options grpc;
  bool reflection = true;  // REFLECTION_ENABLED: gRPC server reflection on the gRPC listener
  std::chrono::milliseconds shutdown_grace{10'000};
  // MAX_CONNECTIONS: client connections on the HTTP and gRPC listeners together; by default what the open
  // file limit leaves after core::reserved_descriptors.
  std::uint64_t max_connections = 0;
};

// `open_file_limit`: RLIMIT_NOFILE as raised at start-up; MAX_CONNECTIONS must stay below it.
process_settings read_process_settings(const core::env_reader& env, std::uint64_t open_file_limit);
// Their declarations (core/setting.hpp), LOG_LEVEL's included.
std::span<const core::setting> process_settings_list();

}  // namespace sluice
