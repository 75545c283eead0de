// Bidirectional streaming on the gRPC server, frame by frame: an in-process nghttp2 client
// (tests/support/h2_loopback) opens a stream, sends messages split anywhere, and sees each answer as the
// server writes it, long before either side ends.

#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../../support/h2_loopback.hpp"
#include "health.pb.h"
#include "net/grpc/call.hpp"

using namespace std::chrono_literals;
using sluice::test::grpc_server_side;
using sluice::test::gzip;
using sluice::test::h2_client;
namespace sg = sluice::net::grpc;
using message = ::grpc::health::v1::HealthCheckRequest;

namespace {

constexpr auto chat_path = "/test.Chat/Talk";

std::string framed(const std::string& text) {
  message m;
  m.set_service(text);
  return h2_client::frame(m.SerializeAsString());
}

// The messages the client received on a stream, in order (each a framed HealthCheckRequest).
std::vector<std::string> received(const std::string& body) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at + 5 <= body.size();) {
    const std::size_t n =
        static_cast<unsigned char>(body[at + 1]) << 24 | static_cast<unsigned char>(body[at + 2]) << 16 |
        static_cast<unsigned char>(body[at + 3]) << 8 | static_cast<unsigned char>(body[at + 4]);
    message m;
    REQUIRE(m.ParseFromString(body.substr(at + 5, n)));
    out.push_back(m.service());
    at += 5 + n;
  }
  return out;
}

// Echoes every message at once; "stop" finishes the call with OK, "flood" writes 10 answers of 1 KB.
struct echo_listener : sg::stream_listener {
  std::vector<std::string> heard;
  int half_closes = 0;
  int cancels = 0;
  bool going_away = false;

  void on_message(std::string_view bytes) override {
    message m;
    REQUIRE(m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
    heard.push_back(m.service());
    if (m.service() == "stop") return call_->finish(sg::status_code::ok);
    if (m.service() == "flood") {
      m.set_service(std::string(1024, 'f'));
      for (int i = 0; i < 10; ++i) call_->write(m);
      return;
    }
    call_->write(m);
  }
  void on_half_close() override {
    ++half_closes;
    stream_listener::on_half_close();
  }
  void on_going_away() override { going_away = true; }
  void on_cancel() override { ++cancels; }
};

struct fixture {
  boost::asio::io_context io;
  sg::method_table methods;
  std::shared_ptr<echo_listener> listener;
  std::unique_ptr<grpc_server_side> server;
  h2_client client;

  explicit fixture(sg::call_limits limits = {}) {
    methods.add(
        chat_path,
        [this](const std::shared_ptr<sg::call>& c) {
          listener = std::make_shared<echo_listener>();
          c->listen(listener);
        },
        sg::method_kind::bidi_streaming);
    server = std::make_unique<grpc_server_side>(io, methods, limits);
  }
  std::int32_t open(std::vector<std::pair<std::string, std::string>> extra = {}) {
    extra.insert(extra.begin(), {{":path", chat_path}, {"content-type", "application/grpc"}});
    return client.open(extra);
  }
  void pump() { client.pump(server->session(), io); }
};

}  // namespace

TEST_CASE("a bidirectional stream: each message is answered as it arrives; half-close ends it with OK") {
  fixture f;
  auto id = f.open();
  f.client.send(id, framed("one"));
  f.pump();
  REQUIRE(f.listener);
  CHECK(f.client.at(id).headers[":status"] == "200");
  CHECK(received(f.client.at(id).body) == std::vector<std::string>{"one"});
  CHECK_FALSE(f.client.at(id).closed);

  // A message split byte by byte, then two in one DATA frame.
  const auto two = framed("two");
  for (char c : two) {
    f.client.send(id, std::string(1, c));
    f.pump();
  }
  f.client.send(id, framed("three") + framed("four"));
  f.pump();
  CHECK(received(f.client.at(id).body) == std::vector<std::string>{"one", "two", "three", "four"});

  f.client.send(id, "", true);
  f.pump();
  auto& r = f.client.at(id);
  CHECK(f.listener->half_closes == 1);
  CHECK(r.closed);
  CHECK(r.error_code == 0);
  CHECK(r.trailers["grpc-status"] == "0");
  CHECK(f.listener->cancels == 0);
}

TEST_CASE("the server may end a stream while the client still sends: RST_STREAM NO_ERROR follows") {
  fixture f;
  auto id = f.open();
  f.client.send(id, framed("a") + framed("stop") + framed("ignored"));
  f.pump();
  auto& r = f.client.at(id);
  CHECK(received(r.body) == std::vector<std::string>{"a"});
  CHECK(r.trailers["grpc-status"] == "0");
  CHECK(r.closed);
  CHECK(r.error_code == NGHTTP2_NO_ERROR);
  CHECK(f.listener->heard == std::vector<std::string>{"a", "stop"});
}

TEST_CASE("many messages past the connection window: flow control is given back message by message") {
  fixture f;
  auto id = f.open();
  const std::string big = framed(std::string(1 << 20, 'x'));
  for (int i = 0; i < 40; ++i) {  // 40 MiB, more than twice the 16 MiB connection window
    f.client.send(id, big);
    f.pump();
  }
  CHECK(f.listener->heard.size() == 40);
  f.client.send(id, framed("last"), true);
  f.pump();
  CHECK(f.listener->heard.back() == "last");
  CHECK(f.client.at(id).trailers["grpc-status"] == "0");
}

TEST_CASE("a message over the receive limit ends the stream at once with RESOURCE_EXHAUSTED") {
  fixture f(sg::call_limits{.max_recv_message_bytes = 1000});
  auto id = f.open();
  f.client.send(id, framed("fine"));
  f.pump();
  f.client.send(id, framed(std::string(2000, 'x')).substr(0, 10));  // the prefix alone tells the length
  f.pump();
  auto& r = f.client.at(id);
  CHECK(r.trailers["grpc-status"] == "8");
  CHECK(r.trailers["grpc-message"].find("larger than max (2003 vs. 1000)") != std::string::npos);
  CHECK(r.closed);
  CHECK(f.listener->cancels == 1);
}

TEST_CASE("a bad header on a streaming method is answered without waiting for the half-close") {
  fixture f;
  auto id = f.open({{"grpc-timeout", "soon"}});
  f.client.send(id, framed("x"));
  f.pump();
  auto& r = f.client.at(id);
  CHECK(r.headers["grpc-status"] == "13");
  CHECK(r.closed);
  CHECK_FALSE(f.listener);
}

TEST_CASE("gzip-compressed messages on a stream") {
  fixture f;
  auto id = f.open({{"grpc-encoding", "gzip"}});
  message m;
  m.set_service("zipped");
  const auto zipped = gzip(m.SerializeAsString());
  f.client.send(id, h2_client::frame(zipped, true) + framed("plain"));
  f.pump();
  CHECK(f.listener->heard == std::vector<std::string>{"zipped", "plain"});
}

TEST_CASE("cancellation: a client reset, a deadline") {
  SUBCASE("RST_STREAM") {
    fixture f;
    auto id = f.open();
    f.client.send(id, framed("x"));
    f.pump();
    f.client.reset(id);
    f.pump();
    CHECK(f.listener->cancels == 1);
  }
  SUBCASE("grpc-timeout") {
    fixture f;
    auto id = f.open({{"grpc-timeout", "20m"}});
    f.client.send(id, framed("x"));
    f.pump();
    f.io.run_for(60ms);
    f.pump();
    CHECK(f.client.at(id).trailers["grpc-status"] == "4");
    CHECK(f.listener->cancels == 1);
  }
}

TEST_CASE("GOAWAY ends open streams with UNAVAILABLE after telling their listeners") {
  fixture f;
  auto id = f.open();
  f.client.send(id, framed("x"));
  f.pump();
  f.server->session().goaway();
  f.pump();
  auto& r = f.client.at(id);
  CHECK(f.listener->going_away);
  CHECK(r.trailers["grpc-status"] == "14");
  CHECK(r.closed);
}

TEST_CASE("a client that does not read: past the unsent limit the stream is reset") {
  fixture f(sg::call_limits{.max_unsent_bytes = 4000});
  auto id = f.open();
  f.client.send(id, framed("flood"));
  f.pump();
  CHECK(f.client.at(id).closed);
  CHECK(f.client.at(id).error_code == NGHTTP2_CANCEL);
  CHECK(f.listener->cancels == 1);
}
