#include <doctest/doctest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <optional>
#include <thread>

#include "stats/statsd_transport.hpp"

using namespace sluice::stats;
namespace asio = boost::asio;

namespace {

// The transport on its own thread, as the flusher runs it; the test plays the statsd server with blocking
// calls.
struct running_transport {
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
  std::optional<statsd_transport> transport;
  std::thread thread;

  running_transport(std::uint16_t port, bool udp) {
    transport.emplace(ioc.get_executor(), "127.0.0.1", port, udp);
    thread = std::thread([this] { ioc.run(); });
  }
  ~running_transport() {
    ioc.stop();
    thread.join();
  }
  void send(std::string lines) {
    asio::post(ioc, [this, lines = std::move(lines)] { transport->send(lines); });
  }
};

std::string lines_of(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += "ratelimit.service.rate_limit.domain.key_" + std::to_string(i) + ".total_hits:1|c\n";
  }
  return out;
}

std::string read_exactly(asio::ip::tcp::socket& s, std::size_t bytes) {
  std::string got(bytes, '\0');
  asio::read(s, asio::buffer(got));
  return got;
}

}  // namespace

TEST_CASE("UDP: one flush arrives as datagrams of at most 1432 bytes, whole lines each") {
  asio::io_context server;
  asio::ip::udp::socket receiver(server, {asio::ip::make_address("127.0.0.1"), 0});
  running_transport t(receiver.local_endpoint().port(), true);
  auto sent = lines_of(100);
  t.send(sent);
  std::string received;
  char buf[65536];
  while (received.size() < sent.size()) {
    auto n = receiver.receive(asio::buffer(buf));
    CHECK(n <= 1432);
    CHECK((n > 1000 || received.size() + n == sent.size()));  // packed, not one line per datagram
    CHECK(buf[n - 1] == '\n');
    received.append(buf, n);
  }
  CHECK(received == sent);
}

TEST_CASE("TCP: lines arrive in order; a closed connection is opened again at the next send") {
  asio::io_context server;
  asio::ip::tcp::acceptor acceptor(server, {asio::ip::make_address("127.0.0.1"), 0});
  running_transport t(acceptor.local_endpoint().port(), false);
  t.send("a:1|c\n");
  t.send("b:2|c\n");
  auto first = acceptor.accept();
  CHECK(read_exactly(first, 12) == "a:1|c\nb:2|c\n");

  // The server goes away and comes back: the transport connects again for the next lines.
  first.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // lets the transport see the close
  t.send("c:3|c\n");
  auto second = acceptor.accept();
  CHECK(read_exactly(second, 6) == "c:3|c\n");
}

TEST_CASE("TCP: nobody listening drops the lines, then sends again once the server is back") {
  asio::io_context server;
  asio::ip::tcp::acceptor acceptor(server);
  std::uint16_t port;
  {
    asio::ip::tcp::acceptor probe(server, {asio::ip::make_address("127.0.0.1"), 0});
    port = probe.local_endpoint().port();
  }
  running_transport t(port, false);
  t.send("lost:1|c\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // refused

  asio::ip::tcp::endpoint at(asio::ip::make_address("127.0.0.1"), port);
  acceptor.open(at.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(at);
  acceptor.listen();
  t.send("kept:1|c\n");
  auto s = acceptor.accept();
  CHECK(read_exactly(s, 9) == "kept:1|c\n");
}
