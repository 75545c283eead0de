#pragma once
// Where and how a listener binds: the HTTP, debug, Prometheus and gRPC listeners share these.

#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/socket_base.hpp>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::core {

// The endpoint for host:port: a literal address as it is, a name looked up (synchronously: start-up only).
// On failure `ec` says why.
boost::asio::ip::tcp::endpoint listen_endpoint(boost::asio::io_context& ioc, const std::string& host,
                                               std::uint16_t port, boost::system::error_code& ec);

// SO_REUSEPORT: one listening socket per worker on the same port, the kernel spreading connections.
using reuse_port = boost::asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// Opens `acceptor` on `endpoint`, listening and non-blocking. `shared`: with SO_REUSEPORT, for the workers'
// sockets of one port. On failure `ec` says why and the result names the step that failed ("bind").
std::string_view open_listener(boost::asio::ip::tcp::acceptor& acceptor,
                               const boost::asio::ip::tcp::endpoint& endpoint, bool shared,
                               boost::system::error_code& ec);

// Fails with address_in_use when another socket listens on `endpoint`: a socket is bound there without
// SO_REUSEPORT, then closed. Called before a port's first shared socket, which SO_REUSEPORT would otherwise
// let join another process's listener (a leftover, a second instance) and take half its connections. Port 0
// always passes. (Two processes starting in the same instant can still both pass.)
void check_port_free(boost::asio::io_context& ioc, const boost::asio::ip::tcp::endpoint& endpoint,
                     boost::system::error_code& ec);

// A listener's failure as upstream's (Go's net.Listen) error words it, from the address as configured:
// "listen tcp 127.0.0.1:8080: bind: address already in use".
std::string listen_failure(std::string_view host, std::uint16_t port, std::string_view step,
                           const boost::system::error_code& ec);
// The same for a unix socket: "listen unix /run/rls.sock: bind: address already in use".
std::string listen_failure_unix(std::string_view path, std::string_view step,
                                const boost::system::error_code& ec);

}  // namespace sluice::core
