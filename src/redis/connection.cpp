#include "redis/connection.hpp"

#include <boost/asio/as_tuple.hpp>
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
#include "core/strings.hpp"
#include "redis/error.hpp"

namespace sluice::redis {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t read_chunk = 16 * 1024;

void fail(const std::shared_ptr<pending_request>& request, error_code ec) {
  if (!request->done) return;
  auto done = std::move(request->done);
  request->done = nullptr;
  done(ec, {});
}

}  // namespace

std::shared_ptr<asio::ssl::context> make_tls_context(const tls_config& tls) {
  if (!tls.enabled) return nullptr;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  auto load = [](std::string_view what, const std::string& file, auto&& action) {
    error_code ec;
    action(ec);
    if (ec) throw std::runtime_error(core::cat("invalid file '", file, "' for ", what, ": ", ec.message()));
  };
  if (tls.ca_file.empty()) {
    ctx->set_default_verify_paths();
  } else {
    load("REDIS_TLS_CACERT", tls.ca_file, [&](error_code& ec) { ctx->load_verify_file(tls.ca_file, ec); });
  }
  if (!tls.cert_file.empty() || !tls.key_file.empty()) {
    load("REDIS_TLS_CLIENT_CERT", tls.cert_file,
         [&](error_code& ec) { ctx->use_certificate_chain_file(tls.cert_file, ec); });
    load("REDIS_TLS_CLIENT_KEY", tls.key_file,
         [&](error_code& ec) { ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec); });
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  return ctx;
}

std::string host_of(const std::string& address) {
  auto host = address.substr(0, address.rfind(':'));
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

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
        deadline_timer(strand) {}

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
  std::deque<std::pair<std::weak_ptr<pending_request>, clock_type::time_point>> deadlines;
  std::string read_buffer;
  // Requests handed over by other threads, drained by one posted handler per batch rather than one per
  // request.
  std::mutex incoming_mutex;
  std::vector<std::shared_ptr<pending_request>> incoming;
  std::vector<std::shared_ptr<pending_request>> draining;
  std::atomic<bool> connected{false};
  std::atomic<bool> stopping{false};
  state_observer observer;
  mutable std::mutex error_mutex;
  std::string last_error;
  std::string attempt_error;    // why the current connection attempt failed, when more is known than the code
  std::string current_address;  // config.address, or the master the sentinels named

  void set_connected(bool now) {
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

asio::awaitable<error_code> connection::impl::connect_socket(const std::string& address, bool unix_socket,
                                                             asio::steady_timer& timer) {
  std::vector<asio::generic::stream_protocol::endpoint> endpoints;
  if (unix_socket) {
    endpoints.emplace_back(asio::local::stream_protocol::endpoint(address));
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string::npos) co_return asio::error::invalid_argument;
    asio::ip::tcp::resolver resolver(strand);
    auto result = co_await (resolver.async_resolve(host_of(address), address.substr(colon + 1), use_tuple) ||
                            timer.async_wait(use_tuple));
    if (result.index() == 1) co_return error::connect_timeout;
    auto [ec, resolved] = std::get<0>(result);
    if (ec) co_return ec;
    for (const auto& entry : resolved) endpoints.emplace_back(entry.endpoint());
  }
  error_code last = asio::error::host_not_found;
  for (const auto& endpoint : endpoints) {
    close();
    auto result = co_await (socket.async_connect(endpoint, use_tuple) || timer.async_wait(use_tuple));
    if (result.index() == 1) co_return error::connect_timeout;
    last = std::get<0>(std::get<0>(result));
    if (!last) break;
  }
  if (!last && !unix_socket) socket.set_option(asio::ip::tcp::no_delay(true), last);
  co_return last;
}

// Writes a request on the current stream and reads all its replies (a Redis error reply is a value).
asio::awaitable<error_code> connection::impl::exchange(const request& r, std::vector<value>& replies,
                                                       asio::steady_timer& timer) {
  auto written = co_await (write(asio::buffer(r.payload())) || timer.async_wait(use_tuple));
  if (written.index() == 1) co_return error::connect_timeout;
  if (auto ec = std::get<0>(std::get<0>(written)); ec) co_return ec;
  std::string buffer;
  replies.clear();
  while (replies.size() < r.expected_replies()) {
    value reply;
    std::size_t consumed = 0;
    std::string problem;
    auto status = parse_reply(buffer, consumed, reply, problem);
    if (status == parse_status::protocol_error) {
      attempt_error = "protocol error: " + problem;
      co_return error::protocol_error;
    }
    if (status == parse_status::complete) {
      buffer.erase(0, consumed);
      replies.push_back(std::move(reply));
      continue;
    }
    char chunk[512];
    auto read = co_await (read_some(asio::buffer(chunk)) || timer.async_wait(use_tuple));
    if (read.index() == 1) co_return error::connect_timeout;
    auto [ec, n] = std::get<0>(read);
    if (ec) co_return ec;
    buffer.append(chunk, n);
  }
  co_return error_code{};
}

// AUTH with the given credentials when a password is set (a no-op request otherwise).
static void push_auth(request& r, const std::string& username, const std::string& password) {
  if (password.empty()) return;
  if (username.empty()) {
    r.push({"AUTH", password});
  } else {
    r.push({"AUTH", username, password});
  }
}

// Asks each sentinel in turn where the master is (SENTINEL get-master-addr-by-name); the first answer wins.
asio::awaitable<error_code> connection::impl::find_master(std::string& address, asio::steady_timer& timer) {
  const auto& s = *config.sentinel;
  request ask;
  push_auth(ask, s.username, s.password);
  ask.push({"SENTINEL", "get-master-addr-by-name", s.master_name});
  std::string problems;
  for (const auto& sentinel : s.sentinels) {
    std::vector<value> replies;
    auto ec = co_await connect_socket(sentinel, false, timer);
    if (!ec) ec = co_await exchange(ask, replies, timer);
    close();
    std::string problem = ec ? ec.message() : std::string();
    if (!ec) {
      const value& where = replies.back();
      if (where.type == value::kind::array && where.elements.size() == 2) {
        const auto& ip = where.elements[0].text;
        address =
            core::cat(ip.find(':') == std::string::npos ? ip : "[" + ip + "]", ":", where.elements[1].text);
        co_return error_code{};
      }
      problem = where.is_error() ? where.text : core::cat("does not know master '", s.master_name, "'");
    }
    problems += core::cat(problems.empty() ? "" : "; ", sentinel, ": ", problem);
  }
  attempt_error = core::cat("no sentinel gave the address of master '", s.master_name, "' (", problems, ")");
  co_return error::not_connected;
}

asio::awaitable<error_code> connection::impl::connect_once() {
  asio::steady_timer timer(strand);
  timer.expires_after(config.connect_timeout);
  std::string address = config.address;
  current_address = address;
  if (config.sentinel) {
    if (auto ec = co_await find_master(address, timer); ec) co_return ec;
  }
  current_address = address;
  if (auto ec = co_await connect_socket(address, config.unix_socket, timer); ec) co_return ec;
  if (tls_context) {
    if (auto ec = co_await tls_handshake(timer); ec) co_return ec;
  }
  co_return co_await handshake(timer);
}

asio::awaitable<error_code> connection::impl::tls_handshake(asio::steady_timer& timer) {
  tls = std::make_unique<tls_stream>(socket, *tls_context);
  const std::string host = host_of(current_address);
  // SNI only for names: RFC 6066 does not allow IP addresses there.
  error_code parse_error;
  asio::ip::make_address(host, parse_error);
  if (parse_error) SSL_set_tlsext_host_name(tls->native_handle(), host.c_str());
  if (!config.tls.skip_hostname_verification)
    tls->set_verify_callback(asio::ssl::host_name_verification(host));
  auto result = co_await (tls->async_handshake(asio::ssl::stream_base::client, use_tuple) ||
                          timer.async_wait(use_tuple));
  if (result.index() == 1) co_return error::connect_timeout;
  auto [ec] = std::get<0>(result);
  if (ec)
    attempt_error = core::cat("TLS handshake with Redis at ", current_address, " failed: ", ec.message());
  co_return ec;
}

// AUTH when a password is set, then PING: the connection counts as up only when Redis answers. Behind
// sentinels, ROLE too: a master the sentinels have just demoted must not be used.
asio::awaitable<error_code> connection::impl::handshake(asio::steady_timer& timer) {
  request hello;
  push_auth(hello, config.username, config.password);
  hello.push({"PING"});
  if (config.sentinel) hello.push({"ROLE"});
  std::vector<value> replies;
  if (auto ec = co_await exchange(hello, replies, timer); ec) co_return ec;
  for (const auto& reply : replies) {
    if (reply.is_error()) {
      attempt_error = "Redis refused the connection: " + reply.text;
      co_return error::auth_failed;
    }
  }
  if (config.sentinel) {
    const auto& role = replies.back();
    if (role.type != value::kind::array || role.elements.empty() || role.elements[0].text != "master") {
      attempt_error = core::cat(current_address, ", named by the sentinels, is not the master (yet)");
      co_return error::not_connected;
    }
  }
  co_return error_code{};
}

asio::awaitable<void> connection::impl::reader() {
  for (;;) {
    std::size_t old_size = read_buffer.size();
    read_buffer.resize(old_size + read_chunk);
    auto [ec, n] = co_await read_some(asio::buffer(read_buffer.data() + old_size, read_chunk));
    read_buffer.resize(old_size + n);
    if (ec) {
      if (!stopping)
        set_error(core::cat("connection to Redis at ", current_address, " lost: ", ec.message()));
      co_return;
    }
    error_code protocol;
    std::size_t consumed = requests.on_read(read_buffer, protocol);
    read_buffer.erase(0, consumed);
    if (protocol) {
      set_error(core::cat("Redis at ", current_address, " sent something that is not RESP; reconnecting"));
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
    if (config.write_window.count() > 0) {
      window_timer.expires_after(config.write_window);
      co_await window_timer.async_wait(use_tuple);
    }
    auto data = requests.prepare_write(config.write_limit);
    auto [ec, n] = co_await write(asio::buffer(data));
    if (ec) {
      if (!stopping) set_error(core::cat("write to Redis at ", current_address, " failed: ", ec.message()));
      co_return;
    }
  }
}

// Fails requests that got no reply within the request timeout. All requests share the timeout, so the oldest
// deadline is always at the front.
asio::awaitable<void> connection::impl::expire_requests() {
  while (!stopping) {
    while (!deadlines.empty()) {
      auto front = deadlines.front().first.lock();
      if (front && front->done) break;
      deadlines.pop_front();
    }
    deadline_timer.expires_at(deadlines.empty() ? clock_type::now() + std::chrono::hours(1)
                                                : deadlines.front().second);
    co_await deadline_timer.async_wait(use_tuple);
    const auto now = clock_type::now();
    while (!deadlines.empty() && deadlines.front().second <= now) {
      auto request = deadlines.front().first.lock();
      deadlines.pop_front();
      if (!request || !request->done) continue;
      if (!requests.cancel_unwritten(request.get(), error::request_timeout))
        fail(request, error::request_timeout);
    }
  }
}

asio::awaitable<void> connection::impl::run() {
  auto self = shared_from_this();
  asio::co_spawn(strand, expire_requests(), asio::detached);
  auto backoff = config.reconnect_min;
  std::minstd_rand rng{std::random_device{}()};
  bool reported = false;
  while (!stopping) {
    attempt_error.clear();
    auto ec = co_await connect_once();
    if (stopping) break;
    if (ec) {
      // connect_once leaves a precise message for TLS and AUTH failures; anything else gets a generic one.
      set_error(attempt_error.empty()
                    ? core::cat("cannot connect to Redis at ", current_address, ": ", ec.message())
                    : attempt_error);
      if (!reported && config.log_state_changes) core::log_error(last_error_text(), " (retrying)");
      reported = true;
      auto jittered = backoff / 2 + std::chrono::milliseconds(rng() % (backoff.count() / 2 + 1));
      backoff_timer.expires_after(jittered);
      co_await backoff_timer.async_wait(use_tuple);
      backoff = std::min(backoff * 2, config.reconnect_max);
      continue;
    }
    backoff = config.reconnect_min;
    if (reported && config.log_state_changes) core::log_warn("connected to Redis at ", current_address);
    reported = false;
    set_error("");
    set_connected(true);
    wake_writer.cancel();
    co_await (reader() || writer());
    set_connected(false);
    close();
    read_buffer.clear();
    requests.on_disconnect(error::connection_lost);
    if (!stopping) {
      if (config.log_state_changes) core::log_error(last_error_text());
      reported = true;
    }
  }
}

void connection::impl::exec(std::shared_ptr<pending_request> request) {
  if (stopping) return fail(request, error::shutting_down);
  if (!connected) return fail(request, error::not_connected);
  if (config.sentinel) {
    // After a failover the old master answers writes with READONLY: drop it, the next connection asks the
    // sentinels again.
    request->done = [self = shared_from_this(), inner = std::move(request->done)](
                        error_code ec, std::vector<value>&& replies) {
      for (const auto& r : replies) {
        if (r.is_error() && r.text.starts_with("READONLY")) {
          self->set_error(core::cat("Redis at ", self->current_address, " is no longer the master"));
          error_code ignored;
          self->socket.close(ignored);
          break;
        }
      }
      inner(ec, std::move(replies));
    };
  }
  deadlines.emplace_back(request, clock_type::now() + config.request_timeout);
  if (deadlines.size() == 1) deadline_timer.cancel();
  requests.enqueue(std::move(request));
  wake_writer.cancel();
}

void connection::impl::shutdown() {
  stopping = true;
  set_connected(false);
  requests.fail_all(error::shutting_down);
  error_code ignored;
  socket.close(ignored);
  wake_writer.cancel();
  backoff_timer.cancel();
  deadline_timer.cancel();
}

connection::connection(asio::any_io_executor ex, connection_config config)
    : impl_(std::make_shared<impl>(std::move(ex), config)), config_(std::move(config)) {}

connection::~connection() {
  stop();
}

void connection::start(state_observer observer) {
  impl_->observer = std::move(observer);
  asio::co_spawn(
      impl_->strand, [self = impl_]() { return self->run(); }, asio::detached);
}

void connection::stop() {
  if (impl_->stopping.exchange(true)) return;
  asio::post(impl_->strand, [self = impl_] { self->shutdown(); });
}

void connection::exec(std::shared_ptr<pending_request> request) {
  asio::post(impl_->strand,
             [self = impl_, request = std::move(request)]() mutable { self->exec(std::move(request)); });
}

bool connection::connected() const {
  return impl_->connected.load(std::memory_order_acquire);
}

std::string connection::last_error() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->last_error;
}

}  // namespace sluice::redis
