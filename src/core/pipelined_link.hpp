#pragma once
// What a pipelined client connection does whatever its protocol (Redis, memcached): the socket (TCP or a
// unix socket, TLS over it when asked), the reader that feeds received bytes to the protocol's pipeline, the
// writer that sends everything queued in one write, the request deadlines, and the loop that connects, runs
// both and reconnects with jittered exponential backoff, logging an outage once per cause (not once per
// attempt). The owning connection holds one as a member and gives run() its protocol:
//   asio::awaitable<error_code> connect_once()  connects (connect_socket, tls_handshake) and handshakes;
//                                               may leave a precise message in attempt_error
//   std::string peer() const                    "Redis at host:port", for messages
//   std::string malformed_reply() const         what was wrong with the bytes on_read refused
//   std::string_view next_write()               the pipeline's next write (prepare_write)
// `Pipeline` is a core::request_queue with on_read; `Error` the protocol's error enum (connect_timeout,
// request_timeout, not_connected, connection_lost, shutting_down). Everything runs on the executor given,
// which the owner's other work shares (a strand, for a connection any thread may use).

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/link_settings.hpp"
#include "core/log.hpp"
#include "core/receive_buffer.hpp"
#include "core/request_deadlines.hpp"
#include "core/strings.hpp"
#include "core/tls_client.hpp"
#include "core/use_tuple.hpp"

namespace sluice::core {

template <typename Pipeline, typename Error>
class pipelined_link {
 public:
  using error_code = boost::system::error_code;
  using socket_type = boost::asio::generic::stream_protocol::socket;
  using tls_stream = boost::asio::ssl::stream<socket_type&>;
  using request_pointer = typename Pipeline::pointer;
  using state_observer = std::function<void(bool connected)>;

  pipelined_link(boost::asio::any_io_executor ex, link_settings s)
      : settings(s),
        socket(ex),
        wake_writer(ex),
        window_timer(ex),
        backoff_timer(ex),
        deadline_timer(ex),
        deadlines(deadline_timer) {}

  link_settings settings;
  socket_type socket;
  std::unique_ptr<tls_stream> tls;        // over `socket`, while a TLS connection is up
  boost::asio::steady_timer wake_writer;  // cancelled to tell the writer there is something to write
  boost::asio::steady_timer window_timer;
  boost::asio::steady_timer backoff_timer;
  boost::asio::steady_timer deadline_timer;
  Pipeline requests;
  request_deadlines<typename Pipeline::pointer::element_type> deadlines;
  receive_buffer received;
  std::atomic<bool> connected{false};
  // Until the first attempt to connect has ended, requests wait for it (within their timeout) instead of
  // failing: a decision that reaches a worker just after start-up is not refused.
  std::atomic<bool> starting{true};
  std::atomic<bool> stopping{false};
  // upstream's pool stats cx_total and cx_local_close; `closing_locally` marks a close this side chose.
  std::atomic<std::uint64_t> opened{0};
  std::atomic<std::uint64_t> closed_locally{0};
  bool closing_locally = false;
  state_observer observer;    // hears every change of `connected`
  std::string attempt_error;  // why the current attempt failed, when more is known than the code

  // Connected, or still making its first connection (requests then wait for it). Any thread.
  bool accepting() const {
    return connected.load(std::memory_order_acquire) || starting.load(std::memory_order_acquire);
  }
  std::string last_error() const {
    std::lock_guard lock(error_mutex_);
    return last_error_;
  }
  void set_error(std::string text) {
    std::lock_guard lock(error_mutex_);
    last_error_ = std::move(text);
  }
  void set_connected(bool now) {
    if (now) opened.fetch_add(1, std::memory_order_relaxed);
    if (connected.exchange(now) != now && observer) observer(now);
  }
  void close() {
    error_code ignored;
    tls.reset();
    socket.close(ignored);
  }
  // Closes the connection this side chose to leave; run() connects again.
  void drop() {
    error_code ignored;
    closing_locally = true;
    socket.close(ignored);
  }

  // The connection's byte stream: TLS when up, the plain socket otherwise.
  template <typename Buffers>
  boost::asio::awaitable<std::tuple<error_code, std::size_t>> read_some(const Buffers& buffers) {
    if (tls) co_return co_await tls->async_read_some(buffers, use_tuple);
    co_return co_await socket.async_read_some(buffers, use_tuple);
  }
  template <typename Buffers>
  boost::asio::awaitable<std::tuple<error_code, std::size_t>> write(const Buffers& buffers) {
    if (tls) co_return co_await boost::asio::async_write(*tls, buffers, use_tuple);
    co_return co_await boost::asio::async_write(socket, buffers, use_tuple);
  }

  // Connects to `address` ("host:port", each address it resolves to in turn; with `unix_socket`, a socket
  // file's path), before `timer` expires.
  boost::asio::awaitable<error_code> connect_socket(const std::string& address, bool unix_socket,
                                                    boost::asio::steady_timer& timer);
  // The TLS handshake over the connected socket, before `timer` expires; `host` is the name checked against
  // the certificate.
  boost::asio::awaitable<error_code> tls_handshake(boost::asio::ssl::context& context,
                                                   const std::string& host, bool skip_hostname_verification,
                                                   boost::asio::steady_timer& timer);

  // Connects and reconnects until stop; `owner` keeps the connection alive while the deadlines' loop runs.
  template <typename Protocol>
  boost::asio::awaitable<void> run(Protocol& protocol, std::shared_ptr<void> owner);

  // Queues a request for the next write, or answers it at once: shutting_down after stop, not_connected while
  // down (but during the first attempt to connect).
  void enqueue(request_pointer request) {
    if (stopping) return Pipeline::finish(*request, Error::shutting_down, {});
    if (!connected && !starting) return Pipeline::finish(*request, Error::not_connected, {});
    deadlines.add(request, settings.request_timeout);
    requests.enqueue(std::move(request));
    wake_writer.cancel();
  }

  // Fails every request and closes; run() ends.
  void shutdown() {
    stopping = true;
    set_connected(false);
    requests.fail_all(Error::shutting_down);
    // Only the socket: the TLS stream must outlive the reads and writes still pending on it (they end with
    // operation_aborted); run() drops it once they have.
    error_code ignored;
    socket.close(ignored);
    wake_writer.cancel();
    window_timer.cancel();
    backoff_timer.cancel();
    deadline_timer.cancel();
  }

 private:
  template <typename Protocol>
  boost::asio::awaitable<void> reader(Protocol& protocol);
  template <typename Protocol>
  boost::asio::awaitable<void> writer(Protocol& protocol);

  mutable std::mutex error_mutex_;  // last_error_ is read by other threads (health, logs)
  std::string last_error_;          // "" while connected
};

template <typename Pipeline, typename Error>
boost::asio::awaitable<boost::system::error_code> pipelined_link<Pipeline, Error>::connect_socket(
    const std::string& address, bool unix_socket, boost::asio::steady_timer& timer) {
  namespace asio = boost::asio;
  using namespace asio::experimental::awaitable_operators;
  std::vector<asio::generic::stream_protocol::endpoint> endpoints;
  if (unix_socket) {
    endpoints.emplace_back(asio::local::stream_protocol::endpoint(address));
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) co_return asio::error::invalid_argument;
    asio::ip::tcp::resolver resolver(socket.get_executor());
    auto result = co_await (resolver.async_resolve(host_of(address), address.substr(colon + 1), use_tuple) ||
                            timer.async_wait(use_tuple));
    if (result.index() == 1) co_return Error::connect_timeout;
    auto [ec, resolved] = std::get<0>(result);
    if (ec) co_return ec;
    for (const auto& entry : resolved) endpoints.emplace_back(entry.endpoint());
  }
  error_code last = asio::error::host_not_found;
  for (const auto& endpoint : endpoints) {
    close();
    auto result = co_await (socket.async_connect(endpoint, use_tuple) || timer.async_wait(use_tuple));
    if (result.index() == 1) co_return Error::connect_timeout;
    last = std::get<0>(std::get<0>(result));
    if (!last) break;
  }
  if (!last && !unix_socket) socket.set_option(asio::ip::tcp::no_delay(true), last);
  co_return last;
}

template <typename Pipeline, typename Error>
boost::asio::awaitable<boost::system::error_code> pipelined_link<Pipeline, Error>::tls_handshake(
    boost::asio::ssl::context& context, const std::string& host, bool skip_hostname_verification,
    boost::asio::steady_timer& timer) {
  using namespace boost::asio::experimental::awaitable_operators;
  tls = std::make_unique<tls_stream>(socket, context);
  prepare_tls_client(*tls, host, skip_hostname_verification);
  auto result = co_await (tls->async_handshake(boost::asio::ssl::stream_base::client, use_tuple) ||
                          timer.async_wait(use_tuple));
  if (result.index() == 1) co_return Error::connect_timeout;
  co_return std::get<0>(std::get<0>(result));
}

template <typename Pipeline, typename Error>
template <typename Protocol>
boost::asio::awaitable<void> pipelined_link<Pipeline, Error>::reader(Protocol& protocol) {
  received.clear();
  for (;;) {
    auto [ec, n] = co_await read_some(received.space());
    if (ec) {
      if (!stopping) set_error(cat("connection to ", protocol.peer(), " lost: ", ec.message()));
      co_return;
    }
    received.commit(n);
    error_code malformed;
    received.consume(requests.on_read(received.data(), malformed));
    if (malformed) {
      closing_locally = true;
      set_error(cat(protocol.peer(), " sent ", protocol.malformed_reply(), "; reconnecting"));
      co_return;
    }
  }
}

template <typename Pipeline, typename Error>
template <typename Protocol>
boost::asio::awaitable<void> pipelined_link<Pipeline, Error>::writer(Protocol& protocol) {
  for (;;) {
    if (!requests.has_unwritten()) {
      wake_writer.expires_at(std::chrono::steady_clock::time_point::max());
      co_await wake_writer.async_wait(use_tuple);
      if (stopping) co_return;
      continue;
    }
    if (settings.write_window.count() > 0) {
      window_timer.expires_after(settings.write_window);
      co_await window_timer.async_wait(use_tuple);
    }
    auto [ec, n] = co_await write(boost::asio::buffer(protocol.next_write()));
    if (ec) {
      if (!stopping) set_error(cat("write to ", protocol.peer(), " failed: ", ec.message()));
      co_return;
    }
  }
}

template <typename Pipeline, typename Error>
template <typename Protocol>
boost::asio::awaitable<void> pipelined_link<Pipeline, Error>::run(Protocol& protocol,
                                                                  std::shared_ptr<void> owner) {
  namespace asio = boost::asio;
  using namespace asio::experimental::awaitable_operators;
  // Fails requests that got no reply within the request timeout.
  asio::co_spawn(
      socket.get_executor(),
      [this, owner]() { return deadlines.expire_from(stopping, requests, Error::request_timeout); },
      asio::detached);
  auto backoff = settings.startup_min;
  bool ever_connected = false;
  std::minstd_rand rng{std::random_device{}()};
  std::string reported;  // what was logged last: an outage is logged once per cause
  while (!stopping) {
    attempt_error.clear();
    auto ec = co_await protocol.connect_once();
    if (stopping) break;
    if (ec) {
      close();
      set_error(attempt_error.empty() ? cat("cannot connect to ", protocol.peer(), ": ", ec.message())
                                      : attempt_error);
      if (auto text = last_error(); text != reported) {
        if (settings.log_state_changes) log_error(text, " (retrying)");
        reported = std::move(text);
      }
      if (starting.exchange(false)) requests.fail_all(Error::not_connected);  // down: no more waiting
      backoff_timer.expires_after(backoff / 2 + std::chrono::milliseconds(rng() % (backoff.count() / 2 + 1)));
      co_await backoff_timer.async_wait(use_tuple);
      backoff = std::min(backoff * 2, ever_connected ? settings.reconnect_max : settings.startup_max);
      continue;
    }
    ever_connected = true;
    backoff = settings.reconnect_min;
    if (!reported.empty() && settings.log_state_changes) log_warn("connected to ", protocol.peer());
    reported.clear();
    set_error("");
    set_connected(true);
    starting = false;
    wake_writer.cancel();
    co_await (reader(protocol) || writer(protocol));
    if (closing_locally || stopping) closed_locally.fetch_add(1, std::memory_order_relaxed);
    closing_locally = false;
    set_connected(false);
    close();
    requests.on_disconnect(Error::connection_lost);
    if (!stopping) {
      reported = last_error();
      if (settings.log_state_changes) log_error(reported);
    }
  }
}

}  // namespace sluice::core
