#include "auth/jwks_fetcher.hpp"
#include "core/read_file.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <stdexcept>

#include "core/strings.hpp"
#include "core/use_tuple.hpp"

namespace sluice::auth {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace asio::experimental::awaitable_operators;

namespace {

using core::use_tuple;
constexpr std::size_t body_limit = 1024 * 1024;  // Google's key sets are a few KiB

struct https_target {
  std::string host;
  std::string port = "443";
  std::string path = "/";
};

bool parse_https(std::string_view uri, https_target& out) {
  constexpr std::string_view scheme = "https://";
  if (!uri.starts_with(scheme)) return false;
  uri.remove_prefix(scheme.size());
  auto slash = uri.find_first_of("/?");
  std::string_view authority = uri.substr(0, slash);
  if (slash != std::string_view::npos)
    out.path = uri[slash] == '/' ? std::string(uri.substr(slash)) : "/" + std::string(uri.substr(slash));
  const auto [host, port] = core::split_host_port(authority);
  out.host = host;
  if (!port.empty() || authority.ends_with(':')) out.port = port;
  return !out.host.empty() && !out.port.empty();
}

// Offline use only: a small local file read once per cache period, so the blocking read is acceptable.
fetch_result read_local(std::string_view path) {
  auto body = core::read_file(std::string(path));
  if (!body) return {{}, core::cat("cannot open ", path, ": ", body.error())};
  if (body->size() > body_limit) return {{}, core::cat(path, " is larger than ", body_limit, " bytes")};
  return {std::move(*body), {}};
}

asio::awaitable<fetch_result> get_https(https_target target, std::shared_ptr<asio::ssl::context> tls,
                                        std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(ex);
  asio::steady_timer deadline(ex);
  deadline.expires_after(timeout);
  auto resolved = co_await (resolver.async_resolve(target.host, target.port, use_tuple) ||
                            deadline.async_wait(use_tuple));
  if (resolved.index() == 1) co_return fetch_result{{}, "timed out resolving " + target.host};
  auto [resolve_ec, endpoints] = std::get<0>(resolved);
  if (resolve_ec)
    co_return fetch_result{{}, core::cat("cannot resolve ", target.host, ": ", resolve_ec.message())};

  beast::ssl_stream<beast::tcp_stream> stream(ex, *tls);
  auto remaining = [&] { return deadline.expiry() - asio::steady_timer::clock_type::now(); };
  beast::get_lowest_layer(stream).expires_after(remaining());
  auto [connect_ec, endpoint] = co_await beast::get_lowest_layer(stream).async_connect(endpoints, use_tuple);
  if (connect_ec)
    co_return fetch_result{{}, core::cat("cannot connect to ", target.host, ": ", connect_ec.message())};

  // SNI only for names: RFC 6066 does not allow IP addresses there.
  boost::system::error_code not_ip;
  asio::ip::make_address(target.host, not_ip);
  if (not_ip) SSL_set_tlsext_host_name(stream.native_handle(), target.host.c_str());
  stream.set_verify_mode(asio::ssl::verify_peer);
  stream.set_verify_callback(asio::ssl::host_name_verification(target.host));
  beast::get_lowest_layer(stream).expires_after(remaining());
  auto [handshake_ec] = co_await stream.async_handshake(asio::ssl::stream_base::client, use_tuple);
  if (handshake_ec)
    co_return fetch_result{
        {}, core::cat("TLS handshake with ", target.host, " failed: ", handshake_ec.message())};

  http::request<http::empty_body> request(http::verb::get, target.path, 11);
  request.set(http::field::host, target.host);
  request.set(http::field::user_agent, "sluice");
  request.set(http::field::accept, "application/json");
  request.set(http::field::connection, "close");
  beast::get_lowest_layer(stream).expires_after(remaining());
  auto [write_ec, written] = co_await http::async_write(stream, request, use_tuple);
  if (write_ec)
    co_return fetch_result{{}, core::cat("cannot send to ", target.host, ": ", write_ec.message())};

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);
  beast::get_lowest_layer(stream).expires_after(remaining());
  auto [read_ec, read] = co_await http::async_read(stream, buffer, parser, use_tuple);
  beast::get_lowest_layer(stream).close();
  if (read_ec)
    co_return fetch_result{{}, core::cat("bad response from ", target.host, ": ", read_ec.message())};
  if (parser.get().result_int() != 200)
    co_return fetch_result{{}, core::cat(target.host, " answered HTTP ", parser.get().result_int())};
  co_return fetch_result{std::move(parser.get().body()), {}};
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_jwks_tls_context(const std::string& extra_ca_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->set_default_verify_paths();
  if (!extra_ca_file.empty()) {
    boost::system::error_code ec;
    ctx->load_verify_file(extra_ca_file, ec);
    if (ec)
      throw std::runtime_error(
          core::cat("invalid file '", extra_ca_file, "' for ECHO_JWKS_CACERT: ", ec.message()));
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  return ctx;
}

asio::awaitable<fetch_result> fetch_jwks(std::string uri, std::shared_ptr<asio::ssl::context> tls,
                                         std::chrono::milliseconds timeout) {
  constexpr std::string_view file_scheme = "file://";
  if (std::string_view(uri).starts_with(file_scheme))
    co_return read_local(std::string_view(uri).substr(file_scheme.size()));
  https_target target;
  if (!parse_https(uri, target))
    co_return fetch_result{{}, core::cat("unsupported JWKS URI ", uri, " (https:// or file:// only)")};
  co_return co_await get_https(std::move(target), std::move(tls), timeout);
}

}  // namespace sluice::auth
