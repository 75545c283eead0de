#pragma once
// The gRPC server: HTTP/2 (net/h2) on every worker's io_context. Over TCP each worker has its own listening
// socket on the same port (SO_REUSEPORT: the kernel spreads connections); on a unix socket (GRPC_UDS) one
// acceptor hands connections to the workers in turn. Cleartext is h2c with prior knowledge, as Envoy and
// gRPC clients speak it; with TLS, ALPN h2 and optionally mutual TLS. A connection lives on one worker.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/connection_limit.hpp"
#include "net/grpc/call.hpp"
#include "net/grpc/method_table.hpp"
#include "net/h2/connection.hpp"

namespace sluice::net::grpc {

struct tls_options {
  std::string cert_file;       // GRPC_SERVER_TLS_CERT
  std::string key_file;        // GRPC_SERVER_TLS_KEY
  std::string client_ca_file;  // GRPC_CLIENT_TLS_CACERT: mutual TLS
  std::string client_san;      // GRPC_CLIENT_TLS_SAN
};

struct server_options {
  std::string host = "0.0.0.0";  // GRPC_HOST
  std::uint16_t port = 8081;     // GRPC_PORT
  std::string unix_socket;       // GRPC_UDS: when set, listen there instead of host:port
  std::chrono::milliseconds max_connection_age{std::chrono::hours{24}};       // GRPC_MAX_CONNECTION_AGE
  std::chrono::milliseconds max_connection_age_grace{std::chrono::hours{1}};  // GRPC_MAX_CONNECTION_AGE_GRACE
  std::uint32_t max_concurrent_streams = 1024;                                // GRPC_MAX_CONCURRENT_STREAMS
  std::size_t max_recv_message_bytes = 4 << 20;                               // GRPC_MAX_RECV_MESSAGE_BYTES
  bool use_tls = false;                                                       // GRPC_SERVER_USE_TLS
  tls_options tls;
  // MAX_CONNECTIONS, shared with the other listeners: a connection past it is closed at once. Null: no cap.
  std::shared_ptr<core::connection_limit> connections;
  // Told (from a worker's thread) when one worker's accepting starts failing and when it works again.
  std::function<void(bool accepting)> on_accepting;
};

class server {
 public:
  explicit server(server_options options);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // One per worker, before listen(): the worker's io_context and what its calls are routed to.
  void add_worker(boost::asio::io_context& ioc, std::shared_ptr<const method_table> methods);
  // Loads the TLS files and binds; throws std::runtime_error naming the setting or the address.
  void listen();
  // Starts accepting; certificate files are watched on `control` (reloaded when they change).
  void start(boost::asio::any_io_executor control);
  // "127.0.0.1:8081" or "unix:/run/rls.sock".
  std::string address() const;
  // Thread-safe. Stops accepting, sends GOAWAY on every connection; calls in flight may finish within
  // `grace`, then the connections close.
  void drain(std::chrono::milliseconds grace);
  // Connections still open (summed over the workers; approximate while they change).
  std::size_t open_connections() const;

 private:
  struct worker;
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice::net::grpc
