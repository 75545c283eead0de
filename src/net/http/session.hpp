#pragma once
// Private to the HTTP server: one connection (plain TCP or TLS), serving requests in turn. Included by
// server.cpp only; the listener that accepts connections lives there.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/read_size.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"
#include "net/http/server.hpp"

namespace sluice::net::http::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
using boost::system::error_code;

using core::use_tuple;
// Each connection lives on its own strand (the io_context may run on several threads). The concrete type
// avoids any_io_executor's type erasure on every I/O operation.
using strand_type = asio::strand<asio::io_context::executor_type>;
using socket_type = tcp::socket::rebind_executor<strand_type>::other;
using stream_type = beast::basic_stream<tcp, strand_type>;
using tls_stream_type = beast::ssl_stream<stream_type>;
// Reads ask for at most this much; a small POST arrives in one read.
inline constexpr std::size_t max_read_bytes = 64 * 1024;
inline constexpr std::size_t initial_buffer_bytes = 4 * 1024;
// After an error response the client may still be sending; drain it this long (and at most this much: a
// client sending a huge body gets no more of the server's time) so closing does not reset the connection
// before the client has read the response.
inline constexpr std::chrono::seconds linger_timeout{1};
inline constexpr std::size_t linger_max_bytes = 1024 * 1024;

class session_base;

// What a connection needs of the listener that accepted it.
class session_owner {
 public:
  virtual ~session_owner() = default;
  virtual const server_options& options() const = 0;
  virtual const router& routes() const = 0;
  virtual bool stopping() const = 0;
  virtual void remove(session_base* s) = 0;
};

// What the listener needs of a connection, whatever its stream.
class session_base {
 public:
  virtual ~session_base() = default;
  virtual std::shared_ptr<session_base> lock() = 0;
  virtual strand_type executor() = 0;
  virtual void stop() = 0;
};

// One connection: a coroutine serving requests in turn, confined to the strand of its socket. `Stream` is the
// plain TCP stream or TLS over it.
template <typename Stream>
class session final : public session_base, public std::enable_shared_from_this<session<Stream>> {
 public:
  template <typename... StreamArgs>
  session(std::shared_ptr<session_owner> owner, StreamArgs&&... args)
      : owner_(std::move(owner)), stream_(std::forward<StreamArgs>(args)...) {
    buffer_.reserve(initial_buffer_bytes);
  }
  ~session() override { owner_->remove(this); }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  std::shared_ptr<session_base> lock() override { return this->weak_from_this().lock(); }
  strand_type executor() override { return beast::get_lowest_layer(stream_).get_executor(); }
  asio::awaitable<void> serve();
  // Runs on the session's strand. An idle connection closes now; a busy one notices owner_->stopping().
  void stop() override {
    if (idle_) beast::get_lowest_layer(stream_).socket().cancel();
  }

 private:
  using parser_type = bhttp::request_parser<bhttp::string_body>;

  stream_type& lowest() { return beast::get_lowest_layer(stream_); }
  std::optional<response> parse_error_response(const error_code& ec, const parser_type& parser) const;
  asio::awaitable<error_code> read_request(parser_type& parser);
  asio::awaitable<response> dispatch(const request& req);
  asio::awaitable<void> close(bool linger);

  std::shared_ptr<session_owner> owner_;
  Stream stream_;
  beast::flat_buffer buffer_;  // reused for every request on the connection
  bool idle_ = false;          // waiting for the first byte of a request
};

template <typename Stream>
asio::awaitable<void> session<Stream>::serve() {
  const server_options& opts = owner_->options();
  if constexpr (std::is_same_v<Stream, tls_stream_type>) {
    lowest().expires_after(opts.read_timeout);
    auto [ec] = co_await stream_.async_handshake(asio::ssl::stream_base::server, use_tuple);
    if (ec) {  // not TLS, or a failed handshake: nothing to answer
      lowest().close();
      co_return;
    }
  }
  bool linger = false;
  std::optional<parser_type> parser;
  while (!owner_->stopping()) {
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(opts.max_header_bytes));
    parser->body_limit(opts.max_body_bytes);
    parser->eager(true);
    if (error_code ec = co_await read_request(*parser)) {
      auto error = parse_error_response(ec, *parser);
      if (!error) break;  // end of stream, timeout, reset or stop(): close silently
      lowest().expires_after(opts.read_timeout);
      co_await bhttp::async_write(stream_, *error, use_tuple);
      linger = true;
      break;
    }

    const request& req = parser->get();
    response res = co_await dispatch(req);
    if (!req.keep_alive() || owner_->stopping()) res.keep_alive(false);
    lowest().expires_after(opts.read_timeout);  // the handler's time must not eat into the write's
    auto [ec, written] = co_await bhttp::async_write(stream_, res, use_tuple);
    if (ec || res.need_eof()) break;
  }
  co_await close(linger);
}

// Beast's async_read, inlined: parsing what the buffer already holds needs no I/O (async_read would post a
// completion for that), and the timeout can switch from idle to read when the first byte of a request
// arrives.
template <typename Stream>
asio::awaitable<error_code> session<Stream>::read_request(parser_type& parser) {
  const server_options& opts = owner_->options();
  bool started = false;
  for (;;) {
    if (buffer_.size() != 0) {
      if (!started) {
        // The whole request, however it trickles in, must arrive within read_timeout.
        lowest().expires_after(opts.read_timeout);
        started = true;
      }
      error_code ec;
      std::size_t used = parser.put(buffer_.data(), ec);
      buffer_.consume(used);
      if (parser.is_done()) co_return error_code{};
      if (ec && ec != bhttp::error::need_more) co_return ec;
      if (!ec && used != 0 && buffer_.size() != 0) continue;
    }
    if (!started) {
      // Nothing of this request yet: the connection is idle and stop() may close it.
      idle_ = true;
      lowest().expires_after(opts.idle_timeout);
    }
    auto [ec, n] = co_await stream_.async_read_some(
        buffer_.prepare(beast::read_size(buffer_, max_read_bytes)), use_tuple);
    idle_ = false;
    buffer_.commit(n);
    if (ec == asio::error::eof) {
      if (!parser.got_some()) co_return bhttp::error::end_of_stream;
      error_code eof_ec;
      parser.put_eof(eof_ec);
      if (!eof_ec && !parser.is_done()) eof_ec = bhttp::error::partial_message;
      co_return eof_ec;
    }
    if (ec) co_return ec;
  }
}

template <typename Stream>
std::optional<response> session<Stream>::parse_error_response(const error_code& ec,
                                                              const parser_type& parser) const {
  const server_options& opts = owner_->options();
  // The request line may be incomplete; answer as HTTP/1.1 unless the header was read.
  request fallback;
  const request& req = parser.is_header_done() ? parser.get() : fallback;
  std::optional<response> res;
  if (ec == bhttp::error::body_limit) {
    res = json_error(req, bhttp::status::payload_too_large,
                     core::cat("request body is larger than ", opts.max_body_bytes, " bytes"));
  } else if (ec == bhttp::error::header_limit) {
    res = json_error(req, bhttp::status::request_header_fields_too_large,
                     core::cat("request header is larger than ", opts.max_header_bytes, " bytes"));
  } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
             ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    res = json_error(req, bhttp::status::bad_request, core::cat("malformed HTTP request: ", ec.message()));
  } else {
    return res;  // I/O error or timeout: nobody to answer
  }
  res->keep_alive(false);
  return res;
}

template <typename Stream>
asio::awaitable<response> session<Stream>::dispatch(const request& req) {
  std::string_view target = req.target();
  const handler* h = owner_->routes().find(target);
  if (!h) {
    std::string_view path = target.substr(0, target.find('?'));
    std::string_view method = req.method_string();
    co_return json_error(req, bhttp::status::not_found, core::cat("no route for ", method, " ", path));
  }
  std::string failure;
  try {
    co_return co_await (*h)(req);
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "unknown exception";
  }
  // What went wrong goes to the log, never to the client.
  core::log_error("HTTP handler for ", std::string_view(req.method_string()), " ", target,
                  " failed: ", failure);
  co_return json_error(req, bhttp::status::internal_server_error, "internal error");
}

template <typename Stream>
asio::awaitable<void> session<Stream>::close(bool linger) {
  error_code ignored;
  if constexpr (std::is_same_v<Stream, tls_stream_type>) {
    lowest().expires_after(linger_timeout);
    co_await stream_.async_shutdown(use_tuple);  // close_notify; a peer that is gone just times out
  }
  lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
  if (linger) {
    lowest().expires_after(linger_timeout);
    for (std::size_t drained = 0; drained < linger_max_bytes;) {
      buffer_.clear();
      auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(max_read_bytes), use_tuple);
      if (ec) break;
      drained += n;
    }
  }
  lowest().close();
}

}  // namespace sluice::net::http::detail
