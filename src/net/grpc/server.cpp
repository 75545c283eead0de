#include "net/grpc/server.hpp"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <unordered_set>

#include "core/accept_errors.hpp"
#include "core/listen_endpoint.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "net/tls/server_certificate.hpp"

namespace sluice::net::grpc {

namespace asio = boost::asio;
using asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;
using boost::system::error_code;

namespace {

constexpr std::size_t read_buffer_bytes = 64 * 1024;
// After an accept error (typically out of file descriptors): pause, and say so once per episode.
constexpr std::chrono::milliseconds accept_backoff{100};
constexpr unsigned accepts_per_turn = 32;

}  // namespace

// One worker's share: its listening socket, its connections and the calls on them. Only touched on the
// worker's thread, except the atomic count.
struct server::worker final : h2::connection_owner, std::enable_shared_from_this<worker> {
  worker(asio::io_context& c, std::shared_ptr<const method_table> m, const server_options& o)
      : ioc(c), methods(std::move(m)), accept_pause(c), accept_errors("gRPC", o.on_accepting) {
    limits.max_recv_message_bytes = o.max_recv_message_bytes;
    connection.h2.max_concurrent_streams = o.max_concurrent_streams;
    // Room for the largest request and then some; it bounds what unfinished requests hold per connection.
    connection.h2.connection_window =
        static_cast<std::uint32_t>(std::max<std::size_t>(16 << 20, o.max_recv_message_bytes + (1 << 20)));
    connection.max_age = o.max_connection_age;
    connection.max_age_grace = o.max_connection_age_grace;
  }

  std::shared_ptr<h2::stream> open_stream(h2::session&, const asio::any_io_executor& ex) override {
    return std::make_shared<call>(*methods, limits, ex);
  }
  void add(h2::connection_base* c) override {
    connections.insert(c);
    open.fetch_add(1, std::memory_order_relaxed);
  }
  void remove(h2::connection_base* c) override {
    connections.erase(c);
    open.fetch_sub(1, std::memory_order_relaxed);
  }
  std::vector<std::uint8_t>& read_buffer() override {
    if (buffer.empty()) buffer.resize(read_buffer_bytes);
    return buffer;
  }

  // Takes a new connection (on this worker's thread).
  template <typename Socket>
  void serve(Socket socket, const std::shared_ptr<asio::ssl::context>& tls,
             core::connection_limit::slot slot) {
    if (draining) return;
    if (tls) {
      using stream = asio::ssl::stream<Socket>;
      std::make_shared<h2::connection<stream>>(shared_from_this(), connection, tls, std::move(slot),
                                               std::move(socket), *tls)
          ->start();
    } else {
      std::make_shared<h2::connection<Socket>>(shared_from_this(), connection, nullptr, std::move(slot),
                                               std::move(socket))
          ->start();
    }
  }

  void drain(std::chrono::milliseconds grace) {
    draining = true;
    error_code ignored;
    if (acceptor) acceptor->close(ignored);
    accept_pause.cancel();
    // Copied: a drain may close (and so remove) connections.
    std::vector<h2::connection_base*> live(connections.begin(), connections.end());
    for (auto* c : live) c->drain(grace);
  }

  asio::io_context& ioc;
  std::shared_ptr<const method_table> methods;
  call_limits limits;
  h2::connection_options connection;
  std::unordered_set<h2::connection_base*> connections;
  std::atomic<std::size_t> open{0};
  std::vector<std::uint8_t> buffer;
  std::optional<tcp::acceptor> acceptor;
  asio::steady_timer accept_pause;
  bool draining = false;
  core::accept_errors accept_errors;
};

struct server::impl {
  explicit impl(server_options o) : options(std::move(o)) {}

  tcp::endpoint resolve(asio::io_context& ioc) const;
  [[noreturn]] void fail(std::string_view step, const boost::system::error_code& ec) const;
  void listen_tcp();
  void listen_unix();
  // Accepts the connections waiting (without blocking, so that "nothing waiting" ends an episode of errors
  // even when no client has connected since), hands each with its MAX_CONNECTIONS slot to `serve`, then
  // arranges for `again` to run when more arrive, after a pause on an error, or soon after a full turn.
  template <typename Acceptor, typename Serve>
  void accept(worker& w, Acceptor& acceptor, asio::io_context& target, std::function<void()> again,
              Serve serve);
  void accept_tcp(const std::shared_ptr<worker>& w);
  void accept_unix();
  std::shared_ptr<asio::ssl::context> tls() const { return certificate ? certificate->current() : nullptr; }

  server_options options;
  std::vector<std::shared_ptr<worker>> workers;
  std::unique_ptr<tls::server_certificate> certificate;
  std::optional<unix_socket::acceptor> unix_acceptor;  // on the first worker's io_context
  std::size_t next_worker = 0;
  std::uint16_t bound_port = 0;
};

// Upstream's words: "Failed to listen for gRPC on '127.0.0.1:8081': listen tcp 127.0.0.1:8081: bind: ...".
void server::impl::fail(std::string_view step, const error_code& ec) const {
  const auto address = options.unix_socket.empty() ? core::host_port(options.host, options.port)
                                                   : core::cat("unix:", options.unix_socket);
  auto reason = options.unix_socket.empty() ? core::listen_failure(options.host, options.port, step, ec)
                                            : core::listen_failure_unix(options.unix_socket, step, ec);
  throw std::runtime_error(core::cat("Failed to listen for gRPC on '", address, "': ", reason));
}

tcp::endpoint server::impl::resolve(asio::io_context& ioc) const {
  error_code ec;
  auto endpoint = core::listen_endpoint(ioc, options.host, options.port, ec);
  if (ec) fail("", ec);
  return endpoint;
}

void server::impl::listen_tcp() {
  auto endpoint = resolve(workers.front()->ioc);
  const bool shared = workers.size() > 1;
  error_code ec;
  // Another process's listener is refused, not joined (SO_REUSEPORT would let the workers' sockets join it).
  if (shared) core::check_port_free(workers.front()->ioc, endpoint, ec);
  if (ec) fail("bind", ec);
  for (auto& w : workers) {
    auto& a = w->acceptor.emplace(w->ioc);
    const auto step = core::open_listener(a, endpoint, shared, ec);
    if (ec) fail(step, ec);
    if (endpoint.port() == 0) endpoint = a.local_endpoint(ec);  // the others bind the port it got
    if (ec) fail("getsockname", ec);
  }
  bound_port = endpoint.port();
}

void server::impl::listen_unix() {
  error_code ec;
  auto& ioc = workers.front()->ioc;
  unix_socket::endpoint endpoint(options.unix_socket);
  {
    // A socket file left by an earlier run is removed; one that another process still accepts on is not.
    unix_socket::socket probe(ioc);
    probe.connect(endpoint, ec);
    if (!ec) fail("bind", asio::error::address_in_use);
  }
  std::filesystem::remove(options.unix_socket, ec);
  auto& a = unix_acceptor.emplace(ioc);
  std::string_view step = "socket";
  a.open(endpoint.protocol(), ec);
  if (!ec) step = "bind", a.bind(endpoint, ec);
  if (!ec) step = "listen", a.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) step = "fcntl", a.non_blocking(true, ec);  // accept() never waits
  if (ec) fail(step, ec);
}

template <typename Acceptor, typename Serve>
void server::impl::accept(worker& w, Acceptor& acceptor, asio::io_context& target,
                          std::function<void()> again, Serve serve) {
  if (w.draining || !acceptor.is_open()) return;
  for (unsigned i = 0; i < accepts_per_turn; ++i) {
    error_code ec;
    auto socket = acceptor.accept(target, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      w.accept_errors.accepting();  // nothing waiting, and no error
      acceptor.async_wait(Acceptor::wait_read, [again = std::move(again)](error_code e) {
        if (!e) again();  // else closed by a drain
      });
      return;
    }
    if (ec) {
      w.accept_errors.failed(ec);
      w.accept_pause.expires_after(accept_backoff);
      w.accept_pause.async_wait([again = std::move(again)](error_code e) {
        if (!e) again();
      });
      return;
    }
    w.accept_errors.accepting();
    core::connection_limit::slot slot;
    if (options.connections && !(slot = options.connections->try_acquire())) continue;  // closes it
    serve(std::move(socket), std::move(slot));
  }
  // Through a flood of connections, let the worker's other work run now and then.
  asio::post(w.ioc, std::move(again));
}

void server::impl::accept_tcp(const std::shared_ptr<worker>& w) {
  accept(
      *w, *w->acceptor, w->ioc, [this, w] { accept_tcp(w); },
      [this, &worker = *w](auto accepted, core::connection_limit::slot slot) {
        tcp::socket socket(std::move(accepted));
        error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        worker.serve(std::move(socket), tls(), std::move(slot));
      });
}

// One acceptor (on the first worker) hands connections to the workers in turn.
void server::impl::accept_unix() {
  accept(
      *workers.front(), *unix_acceptor, workers.front()->ioc, [this] { accept_unix(); },
      [this](auto socket, core::connection_limit::slot slot) {
        auto& target = workers[next_worker++ % workers.size()];
        asio::post(target->ioc,
                   [target, s = unix_socket::socket(std::move(socket)), ctx = tls(),
                    slot = std::move(slot)]() mutable { target->serve(std::move(s), ctx, std::move(slot)); });
      });
}

server::server(server_options options) : impl_(std::make_unique<impl>(std::move(options))) {}

server::~server() = default;

void server::add_worker(asio::io_context& ioc, std::shared_ptr<const method_table> methods) {
  impl_->workers.push_back(std::make_shared<worker>(ioc, std::move(methods), impl_->options));
}

void server::listen() {
  auto& o = impl_->options;
  if (o.use_tls) {
    tls::certificate_options c;
    c.cert_file = o.tls.cert_file;
    c.key_file = o.tls.key_file;
    c.cert_setting = "GRPC_SERVER_TLS_CERT";
    c.key_setting = "GRPC_SERVER_TLS_KEY";
    c.client_ca_file = o.tls.client_ca_file;
    c.client_san = o.tls.client_san;
    c.alpn_h2 = true;
    c.description = "gRPC server certificate";
    impl_->certificate = std::make_unique<tls::server_certificate>(std::move(c));
  }
  if (o.unix_socket.empty()) {
    impl_->listen_tcp();
  } else {
    impl_->listen_unix();
  }
}

void server::start(asio::any_io_executor control) {
  if (impl_->certificate) impl_->certificate->watch(std::move(control));
  if (impl_->unix_acceptor) {
    asio::post(impl_->unix_acceptor->get_executor(), [this] { impl_->accept_unix(); });
    return;
  }
  for (auto& w : impl_->workers) asio::post(w->ioc, [this, w] { impl_->accept_tcp(w); });
}

std::string server::address() const {
  if (!impl_->options.unix_socket.empty()) return "unix:" + impl_->options.unix_socket;
  return core::host_port(impl_->options.host, impl_->bound_port);
}

void server::drain(std::chrono::milliseconds grace) {
  if (impl_->certificate) impl_->certificate->stop();
  for (auto& w : impl_->workers) {
    asio::post(w->ioc, [this, w, grace] {
      if (w == impl_->workers.front() && impl_->unix_acceptor) {
        error_code ignored;
        impl_->unix_acceptor->close(ignored);
      }
      w->drain(grace);
    });
  }
}

std::size_t server::open_connections() const {
  std::size_t n = 0;
  for (const auto& w : impl_->workers) n += w->open.load(std::memory_order_relaxed);
  return n;
}

}  // namespace sluice::net::grpc
