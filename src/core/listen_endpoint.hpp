#pragma once
// Where a listener binds: the HTTP, debug, Prometheus and gRPC listeners share these.

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/socket_base.hpp>
#include <cstdint>
#include <string>

namespace sluice::core {

// The endpoint for host:port: a literal address as it is, a name looked up (synchronously: start-up only).
// On failure `ec` says why.
boost::asio::ip::tcp::endpoint listen_endpoint(boost::asio::io_context& ioc, const std::string& host,
                                               std::uint16_t port, boost::system::error_code& ec);

// SO_REUSEPORT: one listening socket per worker on the same port, the kernel spreading connections.
using reuse_port = boost::asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

}  // namespace sluice::core
