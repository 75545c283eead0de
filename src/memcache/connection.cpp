#include "memcache/connection.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <random>

#include "core/log.hpp"
#include "core/receive_buffer.hpp"
#include "core/request_deadlines.hpp"
#include "core/strings.hpp"
#include "core/tls_client.hpp"
#include "core/use_tuple.hpp"
#include "memcache/error.hpp"

namespace sluice::memcache {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

namespace {

using core::use_tuple;

}  // namespace

struct connection::impl : std::enable_shared_from_this<impl> {
  using tls_stream = asio::ssl::stream<asio::ip::tcp::socket&>;

  impl(asio::any_io_executor ex, connection_config c)
      : config(std::move(c)),
        socket(ex),
        wake_writer(ex),
        backoff_timer(ex),
        deadline_timer(ex),
        connect_timer(ex),
        deadlines(deadline_timer) {}

  connection_config config;
  asio::ip::tcp::socket socket;
  std::unique_ptr<tls_stream> tls;  // over `socket`, while a TLS connection is up
  asio::steady_timer wake_writer;   // cancelled to tell the writer there is something to write
  asio::steady_timer backoff_timer;
  asio::steady_timer deadline_timer;
  asio::steady_timer connect_timer;
  pipeline requests;
  core::request_deadlines<pending_request> deadlines;
  core::receive_buffer received;
  std::atomic<bool> connected{false};
  // Until the first attempt to connect has ended, requests wait for it (within their timeout) instead of
  // failing: decisions that come just after start-up are not refused.
  std::atomic<bool> starting{true};
  std::atomic<bool> stopping{false};
  mutable std::mutex error_mutex;
  std::string last_error;

  void set_error(std::string text) {
    std::lock_guard lock(error_mutex);
    last_error = std::move(text);
  }
  std::string error_text() const {
    std::lock_guard lock(error_mutex);
    return last_error;
  }
  void close() {
    error_code ignored;
    tls.reset();
    socket.close(ignored);
  }

  template <typename Buffers>
  asio::awaitable<std::tuple<error_code, std::size_t>> read_some(const Buffers& buffers) {
    if (tls) co_return co_await tls->async_read_some(buffers, use_tuple);
    co_return co_await socket.async_read_some(buffers, use_tuple);
  }
  template <typename Buffers>
  asio::awaitable<std::tuple<error_code, std::size_t>> write(const Buffers& buffers) {
    if (tls) co_return co_await asio::async_write(*tls, buffers, use_tuple);
    co_return co_await asio::async_write(socket, buffers, use_tuple);
  }

  asio::awaitable<error_code> connect_once();
  asio::awaitable<void> reader();
  asio::awaitable<void> writer();
  asio::awaitable<void> expire_requests();
  asio::awaitable<void> run();
  void exec(std::shared_ptr<pending_request> request);
  void shutdown();
};

// TCP (each resolved address in turn), then the TLS handshake, all within the connect timeout.
asio::awaitable<error_code> connection::impl::connect_once() {
  connect_timer.expires_after(config.connect_timeout);
  const auto colon = config.address.rfind(':');
  if (colon == std::string::npos) co_return asio::error::invalid_argument;
  // SRV targets are fully qualified ("cache-1.example.org."): glibc's hosts file does not match such a
  // name, and a certificate does not name it, so the final dot is dropped.
  std::string host = core::host_of(config.address);
  if (host.size() > 1 && host.back() == '.') host.pop_back();
  asio::ip::tcp::resolver resolver(socket.get_executor());
  auto resolved = co_await (resolver.async_resolve(host, config.address.substr(colon + 1), use_tuple) ||
                            connect_timer.async_wait(use_tuple));
  if (resolved.index() == 1) co_return error::connect_timeout;
  auto [resolve_error, endpoints] = std::get<0>(resolved);
  if (resolve_error) co_return resolve_error;
  error_code last = asio::error::host_not_found;
  for (const auto& entry : endpoints) {
    close();
    auto result =
        co_await (socket.async_connect(entry.endpoint(), use_tuple) || connect_timer.async_wait(use_tuple));
    if (result.index() == 1) co_return error::connect_timeout;
    last = std::get<0>(std::get<0>(result));
    if (!last) break;
  }
  if (last) co_return last;
  socket.set_option(asio::ip::tcp::no_delay(true), last);
  if (!config.tls) co_return error_code{};
  tls = std::make_unique<tls_stream>(socket, *config.tls);
  core::prepare_tls_client(*tls, host, config.skip_hostname_verification);
  auto shaken = co_await (tls->async_handshake(asio::ssl::stream_base::client, use_tuple) ||
                          connect_timer.async_wait(use_tuple));
  if (shaken.index() == 1) co_return error::connect_timeout;
  co_return std::get<0>(std::get<0>(shaken));
}

asio::awaitable<void> connection::impl::reader() {
  received.clear();
  for (;;) {
    auto [ec, n] = co_await read_some(received.space());
    if (ec) {
      if (!stopping)
        set_error(core::cat("connection to memcached at ", config.address, " lost: ", ec.message()));
      co_return;
    }
    received.commit(n);
    error_code protocol;
    received.consume(requests.on_read(received.data(), protocol));
    if (protocol) {
      set_error(core::cat("memcached at ", config.address, " sent an unexpected reply (",
                          requests.last_parse_error(), "); reconnecting"));
      co_return;
    }
  }
}

asio::awaitable<void> connection::impl::writer() {
  for (;;) {
    if (!requests.has_unwritten()) {
      wake_writer.expires_at(clock_type::time_point::max());
      co_await wake_writer.async_wait(use_tuple);
      if (stopping) co_return;
      continue;
    }
    auto [ec, n] = co_await write(asio::buffer(requests.prepare_write()));
    if (ec) {
      if (!stopping)
        set_error(core::cat("write to memcached at ", config.address, " failed: ", ec.message()));
      co_return;
    }
  }
}

// Fails requests that got no reply within the request timeout.
asio::awaitable<void> connection::impl::expire_requests() {
  auto self = shared_from_this();
  co_await deadlines.expire_from(stopping, requests, error::request_timeout);
}

asio::awaitable<void> connection::impl::run() {
  auto self = shared_from_this();
  asio::co_spawn(socket.get_executor(), expire_requests(), asio::detached);
  auto backoff = config.reconnect_min;
  std::minstd_rand rng{std::random_device{}()};
  bool reported = false;
  while (!stopping) {
    auto ec = co_await connect_once();
    if (stopping) break;
    if (starting.exchange(false) && ec) requests.fail_all(error::not_connected);
    if (ec) {
      close();
      set_error(core::cat("cannot connect to memcached at ", config.address, ": ", ec.message()));
      if (!reported && config.log_state_changes) core::log_error(error_text(), " (retrying)");
      reported = true;
      backoff_timer.expires_after(backoff / 2 + std::chrono::milliseconds(rng() % (backoff.count() / 2 + 1)));
      co_await backoff_timer.async_wait(use_tuple);
      backoff = std::min(backoff * 2, config.reconnect_max);
      continue;
    }
    backoff = config.reconnect_min;
    if (reported && config.log_state_changes) core::log_warn("connected to memcached at ", config.address);
    reported = false;
    set_error("");
    connected = true;
    wake_writer.cancel();
    co_await (reader() || writer());
    connected = false;
    close();
    requests.on_disconnect(error::connection_lost);
    if (!stopping) {
      if (config.log_state_changes) core::log_error(error_text());
      reported = true;
    }
  }
}

void connection::impl::exec(std::shared_ptr<pending_request> request) {
  if (stopping) return pipeline::finish(*request, error::shutting_down, {});
  if (!connected && !starting) return pipeline::finish(*request, error::not_connected, {});
  deadlines.add(request, config.request_timeout);
  requests.enqueue(std::move(request));
  wake_writer.cancel();
}

void connection::impl::shutdown() {
  connected = false;
  requests.fail_all(error::shutting_down);
  // Only the socket: the TLS stream must outlive the reads and writes still pending on it (they end with
  // operation_aborted); run() drops it once they have.
  error_code ignored;
  socket.close(ignored);
  wake_writer.cancel();
  backoff_timer.cancel();
  deadline_timer.cancel();
  connect_timer.cancel();
}

connection::connection(asio::any_io_executor ex, connection_config config)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(config))) {}

connection::~connection() {
  stop();
}

void connection::start() {
  asio::co_spawn(
      impl_->socket.get_executor(), [self = impl_] { return self->run(); }, asio::detached);
}

void connection::stop() {
  if (impl_->stopping.exchange(true)) return;
  asio::post(impl_->socket.get_executor(), [self = impl_] { self->shutdown(); });
}

void connection::exec(std::shared_ptr<pending_request> request) {
  impl_->exec(std::move(request));
}

bool connection::connected() const {
  return impl_->connected.load(std::memory_order_acquire);
}

bool connection::accepting() const {
  return impl_->connected.load(std::memory_order_acquire) || impl_->starting.load(std::memory_order_acquire);
}

std::string connection::last_error() const {
  return impl_->error_text();
}

}  // namespace sluice::memcache
