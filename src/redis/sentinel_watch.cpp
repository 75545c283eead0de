#include "redis/sentinel_watch.hpp"

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "core/log.hpp"
#include "core/use_tuple.hpp"
#include "redis/resp.hpp"

namespace sluice::redis {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

namespace {

using core::use_tuple;

// "+switch-master" payload: "<master name> <old ip> <old port> <new ip> <new port>".
bool is_switch_of(const value& message, const std::string& master_name) {
  if (message.type != value::kind::array || message.elements.size() != 3) return false;
  if (message.elements[0].text != "message" || message.elements[1].text != "+switch-master") return false;
  const std::string& payload = message.elements[2].text;
  return payload.starts_with(master_name + " ");
}

}  // namespace

struct sentinel_watch::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor ex, sentinel_config c, std::function<void()> cb)
      : strand(asio::make_strand(ex)),
        config(std::move(c)),
        on_switch(std::move(cb)),
        socket(strand),
        timer(strand) {}

  asio::strand<asio::any_io_executor> strand;
  sentinel_config config;
  std::function<void()> on_switch;
  tcp::socket socket;
  asio::steady_timer timer;
  std::array<char, 1024> chunk;
  bool stopping = false;

  asio::awaitable<void> run();
  asio::awaitable<void> listen(const std::string& sentinel);
};

// Subscribes on one sentinel and reads its messages until the connection ends.
asio::awaitable<void> sentinel_watch::impl::listen(const std::string& sentinel) {
  auto colon = sentinel.rfind(':');
  if (colon == std::string::npos) co_return;
  tcp::resolver resolver(strand);
  auto [rec, endpoints] =
      co_await resolver.async_resolve(sentinel.substr(0, colon), sentinel.substr(colon + 1), use_tuple);
  if (rec) co_return;
  auto [cec, endpoint] = co_await asio::async_connect(socket, endpoints, use_tuple);
  if (cec) co_return;
  request subscribe;
  const auto auth = secret_of(config);
  subscribe.push_auth(auth.username, auth.password);
  subscribe.push({"SUBSCRIBE", "+switch-master"});
  auto [wec, written] = co_await asio::async_write(socket, asio::buffer(subscribe.payload()), use_tuple);
  if (wec) co_return;
  std::string buffer;
  for (;;) {
    value message;
    std::size_t consumed = 0;
    std::string problem;
    auto status = parse_reply(buffer, consumed, message, problem);
    if (status == parse_status::protocol_error) co_return;
    if (status == parse_status::complete) {
      buffer.erase(0, consumed);
      if (message.is_error()) {
        core::log_warn("sentinel ", sentinel, " refused the +switch-master subscription: ", message.text);
        co_return;
      }
      if (is_switch_of(message, config.master_name)) {
        core::log_warn("sentinels switched master '", config.master_name, "': ", message.elements[2].text);
        on_switch();
      }
      continue;
    }
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(chunk), use_tuple);
    if (ec) co_return;
    buffer.append(chunk.data(), n);
  }
}

asio::awaitable<void> sentinel_watch::impl::run() {
  auto self = shared_from_this();
  for (std::size_t i = 0; !stopping; i = (i + 1) % config.sentinels.size()) {
    co_await listen(config.sentinels[i]);
    error_code ignored;
    socket.close(ignored);
    if (stopping) break;
    timer.expires_after(std::chrono::milliseconds(500));
    co_await timer.async_wait(use_tuple);
  }
}

sentinel_watch::sentinel_watch(asio::any_io_executor ex, sentinel_config config,
                               std::function<void()> on_switch)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(config), std::move(on_switch))) {}

sentinel_watch::~sentinel_watch() {
  stop();
}

void sentinel_watch::start() {
  asio::co_spawn(
      impl_->strand, [self = impl_]() { return self->run(); }, asio::detached);
}

void sentinel_watch::stop() {
  asio::post(impl_->strand, [self = impl_] {
    self->stopping = true;
    error_code ignored;
    self->socket.close(ignored);
    self->timer.cancel();
  });
}

}  // namespace sluice::redis
