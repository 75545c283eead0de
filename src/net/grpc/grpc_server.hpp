#pragma once
// A thin wrapper around grpc::Server for the callback API: listens on host:port or a unix socket, registers
// the module services, and runs gRPC's built-in grpc.health.v1.Health (Check and Watch), whose named service
// follows the process health while the empty service name stays SERVING (as upstream, grpc-go's default).

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/grpc/call_tracker.hpp"

namespace sluice::net::grpc {

struct server_options {
  std::string host = "0.0.0.0";  // GRPC_HOST
  std::uint16_t port = 8081;     // GRPC_PORT
  std::string unix_socket;       // GRPC_UDS: when set, listen there instead of host:port
  std::chrono::milliseconds max_connection_age{std::chrono::hours{24}};       // GRPC_MAX_CONNECTION_AGE
  std::chrono::milliseconds max_connection_age_grace{std::chrono::hours{1}};  // GRPC_MAX_CONNECTION_AGE_GRACE
  std::string health_service_name = "ratelimit";
};

class server {
 public:
  explicit server(server_options options);
  ~server();

  // Services must outlive the server.
  void add_service(::grpc::Service* service);
  // Builds and starts; throws std::runtime_error naming the address if it cannot listen.
  void start();
  // The address actually listened on, e.g. "127.0.0.1:8081" or "unix:/run/rls.sock".
  std::string address() const;
  void set_serving(bool serving);
  // Tracks the calls of the services added here; they refuse new calls once shutdown() starts.
  call_tracker& calls() { return calls_; }
  // Refuses new calls, waits up to `grace` for the calls in flight, then stops at once (cancelling any left).
  void shutdown(std::chrono::milliseconds grace);

 private:
  server_options options_;
  std::vector<::grpc::Service*> services_;
  std::unique_ptr<::grpc::Server> server_;
  int bound_port_ = 0;
  call_tracker calls_;
};

}  // namespace sluice::net::grpc
