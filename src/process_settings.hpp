#pragma once
// Part of the composition root: the process-wide settings (logging, workers, the HTTP, gRPC and debug
// listeners, shutdown), read once from the environment. Anything invalid throws core::settings_error naming
// the variable.

#include <chrono>

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
  net::grpc::server_options grpc;
  std::chrono::milliseconds shutdown_grace{10'000};
};

process_settings read_process_settings(const core::env_reader& env);

}  // namespace sluice
