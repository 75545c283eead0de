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

#include "core/accept_errors.hpp"
#include "core/listen_endpoint.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "net/http/session.hpp"
#include "net/tls/server_certificate.hpp"

namespace sluice::net::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

using namespace detail;
using tls_context = asio::ssl::context;
constexpr unsigned accepts_per_turn = 32;

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

// The shared state behind server: acceptor, options, routes and the set of live sessions. Sessions hold a
// shared_ptr to it, so it outlives the server object while connections finish.
class listener : public session_owner, public std::enable_shared_from_this<listener> {
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

  const server_options& options() const override { return options_; }
  const router& routes() const override { return *routes_; }
  bool stopping() const override { return stopping_.load(std::memory_order_acquire); }
  // The current TLS context (null without TLS); each new connection takes the one current when it arrives.
  std::shared_ptr<tls_context> tls() const { return certificate_ ? certificate_->current() : nullptr; }
  // False once stopping: the caller drops the connection.
  bool add(session_base* s) {
    std::lock_guard lock(mutex_);
    if (stopping_.load(std::memory_order_relaxed)) return false;
    sessions_.insert(s);
    return true;
  }
  void remove(session_base* s) override {
    std::lock_guard lock(mutex_);
    sessions_.erase(s);
  }

 private:
  tcp::endpoint resolve() const;
  asio::awaitable<void> accept_loop();
  // Starts serving a new connection; `ctx` (TLS only) lives as long as the connection.
  // `slot` (MAX_CONNECTIONS) is held as long as the connection.
  template <typename Session>
  void spawn(std::shared_ptr<Session> s, std::shared_ptr<tls_context> ctx,
             core::connection_limit::slot slot) {
    if (!add(s.get())) return;
    auto ex = s->executor();
    asio::co_spawn(
        ex, [s = std::move(s), ctx = std::move(ctx), slot = std::move(slot)] { return s->serve(); },
        [](std::exception_ptr e) { log_unexpected("HTTP session failed", e); });
  }

  asio::io_context& ioc_;
  const server_options options_;
  const std::shared_ptr<const router> routes_;
  tcp::acceptor acceptor_;  // on its own strand: stop() closes it from any thread via post
  mutable std::mutex mutex_;
  std::unordered_set<session_base*> sessions_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<tls::server_certificate> certificate_;  // with HTTPS
};

tcp::endpoint listener::resolve() const {
  error_code ec;
  auto endpoint = core::listen_endpoint(ioc_, options_.host, options_.port, ec);
  if (ec) throw std::runtime_error(core::listen_failure(options_.host, options_.port, "", ec));
  return endpoint;
}

tcp::endpoint listener::listen() {
  if (!options_.tls_cert_file.empty()) {
    tls::certificate_options o;
    o.cert_file = options_.tls_cert_file;
    o.key_file = options_.tls_key_file;
    certificate_ = std::make_unique<tls::server_certificate>(std::move(o));
  }
  tcp::endpoint endpoint = resolve();
  error_code ec;
  if (options_.reuse_port && options_.check_port_free) core::check_port_free(ioc_, endpoint, ec);
  std::string_view step = ec ? "bind" : core::open_listener(acceptor_, endpoint, options_.reuse_port, ec);
  if (!ec) endpoint = acceptor_.local_endpoint(ec);
  if (ec) {
    error_code ignored;
    acceptor_.close(ignored);
    throw std::runtime_error(core::listen_failure(options_.host, options_.port, step, ec));
  }
  return endpoint;
}

void listener::start() {
  if (certificate_) certificate_->watch(acceptor_.get_executor());
  asio::co_spawn(
      acceptor_.get_executor(), [self = shared_from_this()] { return self->accept_loop(); },
      [](std::exception_ptr e) { log_unexpected("HTTP accept loop failed", e); });
}

void listener::stop() {
  if (certificate_) certificate_->stop();
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

// Accepts without blocking, so that "nothing waiting" is seen: after an episode of errors, that is when
// accepting works again even if no client has connected since.
asio::awaitable<void> listener::accept_loop() {
  core::accept_errors errors("HTTP", options_.on_accepting);
  for (unsigned accepted = 0;; ++accepted) {
    // Through a flood of connections, let the strand's other work run now and then.
    if (accepted % accepts_per_turn == accepts_per_turn - 1)
      co_await asio::post(acceptor_.get_executor(), use_tuple);
    error_code ec;
    auto socket = acceptor_.accept(asio::make_strand(ioc_), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      errors.accepting();
      auto [wait_error] = co_await acceptor_.async_wait(tcp::acceptor::wait_read, use_tuple);
      if (wait_error || !acceptor_.is_open()) co_return;  // closed by stop()
      continue;
    }
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      errors.failed(ec);
      // Typically out of file descriptors: back off instead of spinning on the error.
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(use_tuple);
      continue;
    }
    errors.accepting();
    core::connection_limit::slot slot;
    if (options_.connections && !(slot = options_.connections->try_acquire())) continue;  // closes it
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (auto ctx = tls()) {
      spawn(std::make_shared<session<tls_stream_type>>(shared_from_this(), std::move(socket), *ctx), ctx,
            std::move(slot));
    } else {
      spawn(std::make_shared<session<stream_type>>(shared_from_this(), std::move(socket)), nullptr,
            std::move(slot));
    }
  }
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
