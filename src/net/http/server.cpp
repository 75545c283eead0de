#include "net/http/server.hpp"

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
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
#include <mutex>
#include <optional>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/file_watch.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"

namespace sluice::net::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
// Each connection lives on its own strand (the io_context may run on several threads). The concrete type
// avoids any_io_executor's type erasure on every I/O operation.
using strand_type = asio::strand<asio::io_context::executor_type>;
using socket_type = tcp::socket::rebind_executor<strand_type>::other;
using stream_type = beast::basic_stream<tcp, strand_type>;
using tls_stream_type = beast::ssl_stream<stream_type>;
using tls_context = asio::ssl::context;
// Reads ask for at most this much; a small POST arrives in one read.
constexpr std::size_t max_read_bytes = 64 * 1024;
constexpr std::size_t initial_buffer_bytes = 4 * 1024;
// After an error response the client may still be sending; drain it this long so closing does not reset the
// connection before the client has read the response.
constexpr std::chrono::seconds linger_timeout{1};

void log_unexpected(std::string_view what, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    core::log_error(what, ": ", ex.what());
  } catch (...) {
    core::log_error(what, ": unknown exception");
  }
}

class session_base;

// The TLS context of HTTP_SERVER_TLS_CERT / _KEY. Throws std::runtime_error naming the file that cannot be
// used.
std::shared_ptr<tls_context> load_tls(const server_options& o) {
  auto ctx = std::make_shared<tls_context>(tls_context::tls_server);
  ctx->set_options(tls_context::default_workarounds | tls_context::no_sslv2 | tls_context::no_sslv3 |
                   tls_context::no_tlsv1 | tls_context::no_tlsv1_1 | tls_context::single_dh_use);
  error_code ec;
  ctx->use_certificate_chain_file(o.tls_cert_file, ec);
  if (ec)
    throw std::runtime_error(
        core::cat("HTTP_SERVER_TLS_CERT: cannot use '", o.tls_cert_file, "': ", ec.message()));
  ctx->use_private_key_file(o.tls_key_file, tls_context::pem, ec);
  if (ec)
    throw std::runtime_error(
        core::cat("HTTP_SERVER_TLS_KEY: cannot use '", o.tls_key_file, "': ", ec.message()));
  return ctx;
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The shared state behind server: acceptor, options, routes and the set of live sessions. Sessions hold a
// shared_ptr to it, so it outlives the server object while connections finish.
class listener : public std::enable_shared_from_this<listener> {
 public:
  listener(asio::io_context& ioc, server_options options, std::shared_ptr<const router> routes)
      : ioc_(ioc),
        options_(std::move(options)),
        routes_(std::move(routes)),
        acceptor_(asio::make_strand(ioc)) {}

  tcp::endpoint listen();
  void start();
  void stop();
  std::size_t open_connections() const {
    std::lock_guard lock(mutex_);
    return sessions_.size();
  }

  const server_options& options() const { return options_; }
  const router& routes() const { return *routes_; }
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  // The current TLS context (null without TLS); each new connection takes the one current when it arrives.
  std::shared_ptr<tls_context> tls() const { return std::atomic_load(&tls_); }
  // False once stopping: the caller drops the connection.
  bool add(session_base* s) {
    std::lock_guard lock(mutex_);
    if (stopping_.load(std::memory_order_relaxed)) return false;
    sessions_.insert(s);
    return true;
  }
  void remove(session_base* s) {
    std::lock_guard lock(mutex_);
    sessions_.erase(s);
  }

 private:
  tcp::endpoint resolve() const;
  asio::awaitable<void> accept_loop();
  void reload_tls();
  // Starts serving a new connection; `ctx` (TLS only) lives as long as the connection.
  template <typename Session>
  void spawn(std::shared_ptr<Session> s, std::shared_ptr<tls_context> ctx) {
    if (!add(s.get())) return;
    auto ex = s->executor();
    asio::co_spawn(
        ex, [s = std::move(s), ctx = std::move(ctx)] { return s->serve(); },
        [](std::exception_ptr e) { log_unexpected("HTTP session failed", e); });
  }

  asio::io_context& ioc_;
  const server_options options_;
  const std::shared_ptr<const router> routes_;
  tcp::acceptor acceptor_;  // on its own strand: stop() closes it from any thread via post
  mutable std::mutex mutex_;
  std::unordered_set<session_base*> sessions_;
  std::atomic<bool> stopping_{false};
  std::shared_ptr<tls_context> tls_;
  std::unique_ptr<core::file_watch> tls_watch_;  // certificates are reloaded when their files change
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
  session(std::shared_ptr<listener> owner, StreamArgs&&... args)
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

  std::shared_ptr<listener> owner_;
  Stream stream_;
  beast::flat_buffer buffer_;  // reused for every request on the connection
  bool idle_ = false;          // waiting for the first byte of a request
};

tcp::endpoint listener::resolve() const {
  error_code ec;
  auto address = asio::ip::make_address(options_.host, ec);
  if (!ec) return {address, options_.port};
  // Start-up only, so a synchronous lookup is fine.
  tcp::resolver resolver(ioc_);
  auto results = resolver.resolve(options_.host, std::to_string(options_.port),
                                  tcp::resolver::passive | tcp::resolver::address_configured, ec);
  if (ec)
    throw std::system_error(
        ec, core::cat("cannot listen for HTTP on ", core::host_port(options_.host, options_.port)));
  return results.begin()->endpoint();
}

void listener::reload_tls() {
  try {
    std::atomic_store(&tls_, load_tls(options_));
    core::log_warn("reloaded the HTTP server certificate from ", options_.tls_cert_file);
  } catch (const std::exception& e) {
    core::log_error(e.what(), " (keeping the previous certificate)");
  }
}

tcp::endpoint listener::listen() {
  if (!options_.tls_cert_file.empty()) tls_ = load_tls(options_);
  tcp::endpoint endpoint = resolve();
  error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) endpoint = acceptor_.local_endpoint(ec);
  if (ec) {
    error_code ignored;
    acceptor_.close(ignored);
    throw std::system_error(
        ec, core::cat("cannot listen for HTTP on ", core::host_port(options_.host, options_.port)));
  }
  return endpoint;
}

void listener::start() {
  if (tls_) {
    std::vector<core::file_watch::target> targets{{parent_directory(options_.tls_cert_file), std::nullopt}};
    if (auto key_dir = parent_directory(options_.tls_key_file); key_dir != targets.front().directory)
      targets.push_back({key_dir, std::nullopt});
    tls_watch_ = std::make_unique<core::file_watch>(acceptor_.get_executor(), std::move(targets),
                                                    std::chrono::milliseconds(100), [this] { reload_tls(); });
    tls_watch_->start();
  }
  asio::co_spawn(
      acceptor_.get_executor(), [self = shared_from_this()] { return self->accept_loop(); },
      [](std::exception_ptr e) { log_unexpected("HTTP accept loop failed", e); });
}

void listener::stop() {
  if (tls_watch_) tls_watch_->stop();
  std::vector<std::shared_ptr<session_base>> live;
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true, std::memory_order_release);
    live.reserve(sessions_.size());
    // A session being destroyed is still in the set (its destructor waits for the mutex) but cannot be
    // locked.
    for (session_base* s : sessions_)
      if (auto p = s->lock()) live.push_back(std::move(p));
  }
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
    error_code ignored;
    self->acceptor_.close(ignored);
  });
  for (auto& s : live) {
    auto ex = s->executor();
    asio::post(ex, [s = std::move(s)] { s->stop(); });
  }
}

asio::awaitable<void> listener::accept_loop() {
  for (;;) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::make_strand(ioc_), use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      core::log_warn("HTTP accept failed: ", ec.message());
      // Typically out of file descriptors: back off instead of spinning on the error.
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (auto ctx = tls()) {
      spawn(std::make_shared<session<tls_stream_type>>(shared_from_this(), std::move(socket), *ctx), ctx);
    } else {
      spawn(std::make_shared<session<stream_type>>(shared_from_this(), std::move(socket)), nullptr);
    }
  }
}

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
    for (;;) {
      buffer_.clear();
      auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(max_read_bytes), use_tuple);
      if (ec) break;
    }
  }
  lowest().close();
}

}  // namespace

struct server::impl : listener {
  using listener::listener;
};

server::server(asio::io_context& ioc, server_options options, std::shared_ptr<const router> routes)
    : impl_(std::make_shared<impl>(ioc, std::move(options), std::move(routes))) {}

server::~server() {
  impl_->stop();
}

tcp::endpoint server::listen() {
  return impl_->listen();
}
void server::start() {
  impl_->start();
}
void server::stop() {
  impl_->stop();
}
std::size_t server::open_connections() const {
  return impl_->open_connections();
}

}  // namespace sluice::net::http
