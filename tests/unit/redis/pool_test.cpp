// redis::pool hands consecutive requests to one connection at a time, by turns of commands_per_turn, so the
// requests of one loop pass share a write. Against a fake Redis on loopback that answers PING and counts the
// commands each connection sent.

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/error.hpp"
#include "redis/pool.hpp"
#include "redis/resp.hpp"

using namespace sluice::redis;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Answers every PING with +PONG and counts them per connection (the first one is the connection's handshake).
class fake_redis {
 public:
  explicit fake_redis(asio::io_context& io)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    accept();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()); }
  // Commands after the handshake, per connection in the order they were accepted.
  std::vector<int> requests() const {
    std::vector<int> out;
    for (const auto& c : conns_) out.push_back(c->pings - 1);
    return out;
  }

 private:
  struct conn {
    explicit conn(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::string pending;
    char buf[4096];
    int pings = 0;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      conns_.push_back(std::make_shared<conn>(std::move(s)));
      read(conns_.back());
      accept();
    });
  }

  void read(std::shared_ptr<conn> c) {
    c->socket.async_read_some(asio::buffer(c->buf), [c, this](boost::system::error_code ec, std::size_t n) {
      if (ec) return;
      c->pending.append(c->buf, n);
      static const std::string ping = "*1\r\n$4\r\nPING\r\n";
      std::string replies;
      std::size_t at = 0;
      while (c->pending.compare(at, ping.size(), ping) == 0) {
        at += ping.size();
        ++c->pings;
        replies += "+PONG\r\n";
      }
      c->pending.erase(0, at);
      if (!replies.empty()) asio::write(c->socket, asio::buffer(replies));
      read(c);
    });
  }

  tcp::acceptor acceptor_;
  std::vector<std::shared_ptr<conn>> conns_;
};

// A PING whose answer goes to `done`.
std::shared_ptr<pending_request> ping(std::function<void(boost::system::error_code)> done) {
  auto r = std::make_shared<pending_request>();
  request cmd;
  cmd.push({"PING"});
  r->payload = cmd.release_payload();
  r->expected_replies = 1;
  r->done = [done = std::move(done)](boost::system::error_code ec, std::vector<value>&&) { done(ec); };
  return r;
}

// A quiet connection to `redis`.
connection_config config_for(const fake_redis& redis) {
  connection_config config;
  config.address = redis.address();
  config.log_state_changes = false;
  config.request_timeout = std::chrono::seconds(5);
  return config;
}

// Sends `count` PINGs through the pool in one go and runs the loop until all are answered.
void send_pings(asio::io_context& io, pool& p, int count) {
  int answered = 0;
  for (int i = 0; i < count; ++i) {
    p.exec(ping([&answered](boost::system::error_code ec) {
      CHECK_FALSE(ec);
      ++answered;
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (answered < count && std::chrono::steady_clock::now() < deadline)
    io.run_for(std::chrono::milliseconds(10));
  REQUIRE(answered == count);
}

}  // namespace

TEST_CASE("pool: consecutive requests go through one connection, a turn of commands_per_turn at a time") {
  asio::io_context io;
  fake_redis redis(io);
  pool p(io.get_executor(), config_for(redis), 4);
  p.start({});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (p.connected_count() < 4 && std::chrono::steady_clock::now() < deadline)
    io.run_for(std::chrono::milliseconds(10));
  REQUIRE(p.connected_count() == 4);
  constexpr int turn = static_cast<int>(pool::commands_per_turn);

  SUBCASE("fewer than a turn: all on one connection") {
    send_pings(io, p, turn / 2);
    auto counts = redis.requests();
    std::sort(counts.begin(), counts.end());
    CHECK(counts == std::vector<int>{0, 0, 0, turn / 2});
  }
  SUBCASE("four turns: one on each connection") {
    send_pings(io, p, 4 * turn);
    CHECK(redis.requests() == std::vector<int>(4, turn));
  }
  p.stop();
  io.run_for(std::chrono::milliseconds(50));
}

namespace {

// One PING through `p`, sent before the loop runs; the loop then runs until it is answered. -> its error.
boost::system::error_code ping_once(asio::io_context& io, pool& p) {
  std::optional<boost::system::error_code> result;
  p.exec(ping([&result](boost::system::error_code ec) { result = ec; }));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!result && std::chrono::steady_clock::now() < deadline) io.run_for(std::chrono::milliseconds(10));
  REQUIRE(result);
  return *result;
}

}  // namespace

TEST_CASE("pool: a request sent before the first connection is made waits for it, within its timeout") {
  // The start-up race of issue 40: a decision that reached a worker first failed with "not connected yet".
  asio::io_context io;
  fake_redis redis(io);
  pool p(io.get_executor(), config_for(redis), 2);
  p.start({});
  CHECK(p.connected_count() == 0);
  CHECK(p.accepting());
  CHECK_FALSE(ping_once(io, p));
  p.stop();
  io.run_for(std::chrono::milliseconds(50));
}

TEST_CASE("pool: once the first attempt has failed, requests fail at once as not connected") {
  asio::io_context io;
  std::uint16_t closed_port = 0;
  {
    tcp::acceptor a(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    closed_port = a.local_endpoint().port();
  }
  connection_config config;
  config.address = "127.0.0.1:" + std::to_string(closed_port);
  config.log_state_changes = false;
  config.request_timeout = std::chrono::seconds(5);
  config.startup_min = config.startup_max = std::chrono::seconds(30);  // no second attempt in the test
  pool p(io.get_executor(), config, 1);
  p.start({});
  // Sent while the first attempt is under way: it waits for it, and fails with it.
  CHECK(ping_once(io, p) == error::not_connected);
  CHECK_FALSE(p.accepting());
  // Sent after: refused inline.
  CHECK(ping_once(io, p) == error::not_connected);
  p.stop();
  io.run_for(std::chrono::milliseconds(50));
}
