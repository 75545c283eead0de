#include "ratelimit/client/debug_http.hpp"

#include <iostream>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

#include "core/strings.hpp"
#include "ratelimit/client/connect_error.hpp"

namespace sluice::ratelimit::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

debug_reply call_debug(const std::string& address, http::verb method, const std::string& target,
                       std::string body, const std::vector<std::pair<std::string, std::string>>& headers,
                       std::chrono::nanoseconds timeout) {
  const auto [host, port] = core::split_host_port(address);
  if (host.empty() || port.empty())
    throw std::invalid_argument(core::cat("'", address, "' is not host:port"));
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout));
  asio::ip::tcp::resolver resolver(ioc);
  beast::error_code ec;
  const auto endpoints = resolver.resolve(std::string(host), std::string(port), ec);
  if (!ec) stream.connect(endpoints, ec);
  if (ec) throw std::runtime_error(cannot_connect(address, error_reason(ec, timeout)));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, address);
  req.set(http::field::user_agent, "sluice");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = std::move(body);
  req.prepare_payload();
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  if (!ec) http::read(stream, buffer, res, ec);
  if (ec) throw std::runtime_error(core::cat(address, ": no answer: ", error_reason(ec, timeout)));
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  return {res.result_int(), std::string(res.reason().data(), res.reason().size()), std::move(res.body())};
}

int run_debug_call(std::string_view command, const std::string& address, boost::beast::http::verb method,
                   const std::string& target, std::string body,
                   const std::vector<std::pair<std::string, std::string>>& headers,
                   std::chrono::nanoseconds timeout) {
  try {
    const auto reply = call_debug(address, method, target, std::move(body), headers, timeout);
    if (reply.status == 200) {
      std::cout << reply.body << "\n";
      return 0;
    }
    std::cerr << "sluice " << command << ": " << reply.status << " " << reply.reason << ": " << reply.body
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "sluice " << command << ": " << e.what() << "\n";
  }
  return 2;
}

}  // namespace sluice::ratelimit::client
