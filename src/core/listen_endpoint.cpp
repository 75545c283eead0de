#include "core/listen_endpoint.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>

#include "core/strings.hpp"

namespace sluice::core {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

tcp::endpoint listen_endpoint(asio::io_context& ioc, const std::string& host, std::uint16_t port,
                              error_code& ec) {
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return {address, port};
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, std::to_string(port),
                                  tcp::resolver::passive | tcp::resolver::address_configured, ec);
  if (!ec && results.empty()) ec = asio::error::host_not_found;
  return ec ? tcp::endpoint{} : results.begin()->endpoint();
}

std::string_view open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint, bool shared,
                               error_code& ec) {
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return "socket";
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec && shared) acceptor.set_option(reuse_port(true), ec);
  if (ec) return "setsockopt";
  acceptor.bind(endpoint, ec);
  if (ec) return "bind";
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "listen";
  acceptor.non_blocking(true, ec);  // accept loops accept without waiting
  return ec ? "fcntl" : "";
}

void check_port_free(asio::io_context& ioc, const tcp::endpoint& endpoint, error_code& ec) {
  ec = {};
  if (endpoint.port() == 0) return;
  tcp::acceptor probe(ioc);
  probe.open(endpoint.protocol(), ec);
  // SO_REUSEADDR as the real sockets: connections of an earlier run in TIME_WAIT do not count.
  if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) probe.bind(endpoint, ec);
  error_code ignored;
  probe.close(ignored);
}

namespace {

// "listen <network> <address>: <step>: <reason>", the reason in lower case as Go writes the system's error.
std::string go_listen_error(std::string_view network, std::string_view address, std::string_view step,
                            const error_code& ec) {
  auto reason = ec.message();
  if (!reason.empty() && reason[0] >= 'A' && reason[0] <= 'Z') reason[0] = static_cast<char>(reason[0] + 32);
  if (step.empty()) return cat("listen ", network, " ", address, ": ", reason);
  return cat("listen ", network, " ", address, ": ", step, ": ", reason);
}

}  // namespace

std::string listen_failure(std::string_view host, std::uint16_t port, std::string_view step,
                           const error_code& ec) {
  return go_listen_error("tcp", host_port(host, port), step, ec);
}

std::string listen_failure_unix(std::string_view path, std::string_view step, const error_code& ec) {
  return go_listen_error("unix", path, step, ec);
}

}  // namespace sluice::core
