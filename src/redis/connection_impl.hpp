#pragma once
// Private to the Redis client: the state of one connection, shared by connection.cpp (the I/O loop) and
// connection_setup.cpp (connecting: sentinels, TCP/unix, TLS, AUTH/PING/ROLE).

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <mutex>
#include <random>

#include "core/log.hpp"
#include "core/receive_buffer.hpp"
#include "core/request_deadlines.hpp"
#include "core/strings.hpp"
#include "core/tls_client.hpp"
#include "core/use_tuple.hpp"
#include "redis/connection.hpp"
#include "redis/error.hpp"

namespace sluice::redis {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

using core::use_tuple;

// Null without TLS; throws std::runtime_error naming the setting of a file that cannot be loaded.
std::shared_ptr<asio::ssl::context> make_tls_context(const tls_config& tls);

struct connection::impl : std::enable_shared_from_this<impl> {
  using tls_stream = asio::ssl::stream<asio::generic::stream_protocol::socket&>;

  impl(asio::any_io_executor ex, const connection_config& config)
      : tls_context(make_tls_context(config.tls)),
        strand(asio::make_strand(ex)),
        config(config),
        socket(strand),
        wake_writer(strand),
        window_timer(strand),
        backoff_timer(strand),
        deadline_timer(strand),
        deadlines(deadline_timer) {}

  std::shared_ptr<asio::ssl::context> tls_context;  // null without TLS
  asio::strand<asio::any_io_executor> strand;
  connection_config config;
  asio::generic::stream_protocol::socket socket;
  std::unique_ptr<tls_stream> tls;  // over `socket`, set while a TLS connection is up
  asio::steady_timer wake_writer;   // cancelled to tell the writer there is something to write
  asio::steady_timer window_timer;  // REDIS_PIPELINE_WINDOW
  asio::steady_timer backoff_timer;
  asio::steady_timer deadline_timer;
  pipeline requests;
  core::request_deadlines<pending_request> deadlines;
  core::receive_buffer received;
  std::atomic<bool> connected{false};
  // Until the first attempt to connect has ended, requests wait for it (within REDIS_OP_TIMEOUT) instead of
  // failing: a decision that reaches a worker just after start-up is not refused (as memcached's).
  std::atomic<bool> starting{true};
  std::atomic<bool> stopping{false};
  // upstream's pool stats cx_total and cx_local_close; `closing_locally` marks a close this side chose.
  std::atomic<std::uint64_t> opened{0};
  std::atomic<std::uint64_t> closed_locally{0};
  bool closing_locally = false;
  state_observer observer;
  mutable std::mutex error_mutex;
  std::string last_error;
  std::string attempt_error;    // why the current connection attempt failed, when more is known than the code
  std::string current_address;  // config.address, or the master the sentinels named

  void set_connected(bool now) {
    if (now) opened.fetch_add(1, std::memory_order_relaxed);
    if (connected.exchange(now) != now && observer) observer(now);
  }
  std::string last_error_text() const {
    std::lock_guard lock(error_mutex);
    return last_error;
  }
  void set_error(std::string text) {
    std::lock_guard lock(error_mutex);
    last_error = std::move(text);
  }

  asio::awaitable<void> run();
  asio::awaitable<error_code> connect_once();
  asio::awaitable<error_code> connect_socket(const std::string& address, bool unix_socket,
                                             asio::steady_timer& timer);
  asio::awaitable<error_code> exchange(const request& r, std::vector<value>& replies,
                                       asio::steady_timer& timer);
  asio::awaitable<error_code> find_master(std::string& address, asio::steady_timer& timer);
  asio::awaitable<error_code> handshake(asio::steady_timer& timer);
  asio::awaitable<error_code> hello(std::vector<value>& replies, asio::steady_timer& timer);
  asio::awaitable<error_code> tls_handshake(asio::steady_timer& timer);
  // The connection's byte stream: TLS when configured, the plain socket otherwise.
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
  void close() {
    error_code ignored;
    tls.reset();
    socket.close(ignored);
  }
  asio::awaitable<void> reader();
  asio::awaitable<void> writer();
  asio::awaitable<void> expire_requests();
  void exec(std::shared_ptr<pending_request> request);
  void shutdown();
};

}  // namespace sluice::redis
