#pragma once
// HTTP/1.1 server on Beast: one coroutine per connection, keep-alive, a fresh parser with size limits per
// request, timeouts re-armed before every read, and a graceful stop that lets in-flight requests finish.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/connection_limit.hpp"
#include "net/http/router.hpp"

namespace sluice::net::http {

struct server_options {
  std::string host = "0.0.0.0";
  std::uint16_t port = 8080;
  std::size_t max_header_bytes = 8 * 1024;
  std::size_t max_body_bytes = 1024 * 1024;
  // How long a kept-alive connection may wait for the first byte of its next request.
  std::chrono::milliseconds idle_timeout{60'000};
  // How long a started request may take to arrive completely.
  std::chrono::milliseconds read_timeout{10'000};
  // HTTPS: a PEM certificate chain and its key (both or neither); reloaded when the files change.
  std::string tls_cert_file;
  std::string tls_key_file;
  // SO_REUSEPORT: one listening socket per worker on the same port, the kernel spreading connections.
  bool reuse_port = false;
  // With reuse_port, for a port's first socket: fail when another process listens there
  // (core::check_port_free).
  bool check_port_free = false;
  // MAX_CONNECTIONS, shared with the other listeners: a connection past it is closed at once. Null: no cap.
  std::shared_ptr<core::connection_limit> connections;
  // Told (from the listener's strand) when accepting starts failing and when it works again.
  std::function<void(bool accepting)> on_accepting;
};

class server {
 public:
  server(boost::asio::io_context& ioc, server_options options, std::shared_ptr<const router> routes);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and listens; on failure throws std::runtime_error in upstream's words ("listen tcp 127.0.0.1:8080:
  // bind: address already in use"). Returns the bound endpoint
  // (port 0 picks a free port).
  boost::asio::ip::tcp::endpoint listen();
  // Starts accepting on the io_context.
  void start();
  // Stops accepting at once; idle keep-alive connections are closed, a connection in the middle of a request
  // finishes that request (its response carries Connection: close) and then closes.
  void stop();
  // Number of open connections (for tests and drain).
  std::size_t open_connections() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace sluice::net::http
