#include "core/listen_endpoint.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>

namespace sluice::core {

namespace asio = boost::asio;
using asio::ip::tcp;

tcp::endpoint listen_endpoint(asio::io_context& ioc, const std::string& host, std::uint16_t port,
                              boost::system::error_code& ec) {
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return {address, port};
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, std::to_string(port),
                                  tcp::resolver::passive | tcp::resolver::address_configured, ec);
  if (!ec && results.empty()) ec = asio::error::host_not_found;
  return ec ? tcp::endpoint{} : results.begin()->endpoint();
}

}  // namespace sluice::core
