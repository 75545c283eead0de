// The gRPC server without a socket: an in-process nghttp2 client talks to one server connection
// (tests/support/h2_loopback), so every case sees exactly the frames a real client would.

#include <doctest/doctest.h>
#include <zlib.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "../../support/h2_loopback.hpp"
#include "health.pb.h"
#include "net/grpc/call.hpp"
#include "net/grpc/message_reader.hpp"
#include "net/grpc/status.hpp"
#include "net/grpc/timeout.hpp"

using namespace std::chrono_literals;
using sluice::test::grpc_server_side;
using sluice::test::gzip;
using sluice::test::h2_client;
namespace sg = sluice::net::grpc;
using health_request = ::grpc::health::v1::HealthCheckRequest;
using health_response = ::grpc::health::v1::HealthCheckResponse;

namespace {

constexpr auto echo_path = "/test.Echo/Echo";

std::string request_body(const std::string& service) {
  health_request r;
  r.set_service(service);
  return h2_client::frame(r.SerializeAsString());
}

// A server whose one method answers SERVING, or keeps the call (`held`) when the request names "hold".
struct fixture {
  boost::asio::io_context io;
  sg::method_table methods;
  std::shared_ptr<sg::call> held;
  bool cancelled = false;
  std::unique_ptr<grpc_server_side> server;
  h2_client client;

  explicit fixture(sg::call_limits limits = {}) {
    methods.add(echo_path, [this](const std::shared_ptr<sg::call>& c) {
      health_request req;
      REQUIRE(req.ParseFromArray(c->request().data(), static_cast<int>(c->request().size())));
      if (req.service() == "hold") {
        held = c;
        c->on_cancel([this] { cancelled = true; });
        return;
      }
      health_response resp;
      resp.set_status(health_response::SERVING);
      c->reply(resp);
    });
    server = std::make_unique<grpc_server_side>(io, methods, limits);
  }
  std::int32_t call(const std::string& body, std::vector<std::pair<std::string, std::string>> extra = {},
                    const std::string& path = echo_path, const std::string& type = "application/grpc") {
    extra.insert(extra.begin(), {{":path", path}, {"content-type", type}});
    return client.request(extra, body);
  }
  void pump() { client.pump(server->session(), io); }
};

}  // namespace

TEST_CASE("grpc-timeout: digits and a unit") {
  CHECK(sg::parse_timeout("20m") == std::chrono::nanoseconds(20ms));
  CHECK(sg::parse_timeout("1S") == std::chrono::nanoseconds(1s));
  CHECK(sg::parse_timeout("3M") == std::chrono::nanoseconds(3min));
  CHECK(sg::parse_timeout("2H") == std::chrono::nanoseconds(2h));
  CHECK(sg::parse_timeout("7u") == std::chrono::nanoseconds(7us));
  CHECK(sg::parse_timeout("99999999n") == std::chrono::nanoseconds(99999999));
  CHECK(sg::parse_timeout("99999999H") == std::chrono::nanoseconds::max());
  CHECK_FALSE(sg::parse_timeout("123456789m"));  // nine digits
  CHECK_FALSE(sg::parse_timeout("m"));
  CHECK_FALSE(sg::parse_timeout("10"));
  CHECK_FALSE(sg::parse_timeout("10x"));
  CHECK_FALSE(sg::parse_timeout("-1m"));
}

TEST_CASE("grpc-message is percent-encoded") {
  CHECK(sg::percent_encode("plain text: ok") == "plain text: ok");
  CHECK(sg::percent_encode("100%\n") == "100%25%0A");
  CHECK(sg::percent_encode("\xc3\xa9") == "%C3%A9");
}

TEST_CASE("message_reader: one message across chunks, limits, gzip") {
  const std::string msg = h2_client::frame("hello");
  sg::message_reader r(1024);
  for (char c : msg) CHECK_FALSE(r.feed({reinterpret_cast<const std::uint8_t*>(&c), 1}));
  CHECK_FALSE(r.finish(sg::encoding::identity));
  CHECK(r.message() == "hello");

  sg::message_reader small(4);
  auto e = small.feed({reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size()});
  REQUIRE(e);
  CHECK(e->code == sg::status_code::resource_exhausted);
  CHECK(e->message == "grpc: received message larger than max (5 vs. 4)");

  sg::message_reader two(1024);
  const std::string both = msg + msg;
  e = two.feed({reinterpret_cast<const std::uint8_t*>(both.data()), both.size()});
  REQUIRE(e);
  CHECK(e->code == sg::status_code::internal);

  sg::message_reader none(1024);
  e = none.finish(sg::encoding::identity);
  REQUIRE(e);
  CHECK(e->message == "grpc: the request has no message");

  const std::string zipped = h2_client::frame(gzip(std::string(5000, 'z')), true);
  sg::message_reader gz(8192);
  CHECK_FALSE(gz.feed({reinterpret_cast<const std::uint8_t*>(zipped.data()), zipped.size()}));
  CHECK_FALSE(gz.finish(sg::encoding::gzip));
  CHECK(gz.message() == std::string(5000, 'z'));

  sg::message_reader bomb(1000);  // inflates past the limit
  CHECK_FALSE(bomb.feed({reinterpret_cast<const std::uint8_t*>(zipped.data()), zipped.size()}));
  e = bomb.finish(sg::encoding::gzip);
  REQUIRE(e);
  CHECK(e->code == sg::status_code::resource_exhausted);

  sg::message_reader flagged(8192);  // compressed flag without grpc-encoding
  CHECK_FALSE(flagged.feed({reinterpret_cast<const std::uint8_t*>(zipped.data()), zipped.size()}));
  e = flagged.finish(sg::encoding::identity);
  REQUIRE(e);
  CHECK(e->code == sg::status_code::internal);
}

TEST_CASE("a unary call: headers, one framed message, trailers with grpc-status 0") {
  fixture f;
  auto id = f.call(request_body("x"), {{"te", "trailers"}, {"x-custom", "ignored"}});
  f.pump();
  auto& r = f.client.at(id);
  CHECK(r.closed);
  CHECK(r.error_code == 0);
  CHECK(r.headers[":status"] == "200");
  CHECK(r.headers["content-type"] == "application/grpc");
  CHECK(r.trailers["grpc-status"] == "0");
  REQUIRE(r.body.size() > 5);
  health_response resp;
  REQUIRE(resp.ParseFromString(r.body.substr(5)));
  CHECK(resp.status() == health_response::SERVING);
}

TEST_CASE("errors before any message are Trailers-Only") {
  fixture f;
  auto unknown_method = f.call(request_body("x"), {}, "/test.Echo/Nope");
  auto unknown_service = f.call(request_body("x"), {}, "/other.Service/Echo");
  auto bad_type = f.call(request_body("x"), {}, echo_path, "application/json");
  auto plus_type = f.call(request_body("x"), {}, echo_path, "application/grpc+proto");
  auto bad_timeout = f.call(request_body("x"), {{"grpc-timeout", "soon"}});
  auto bad_encoding = f.call(request_body("x"), {{"grpc-encoding", "br"}});
  f.pump();
  auto& m = f.client.at(unknown_method);
  CHECK(m.header_blocks == 1);
  CHECK(m.body.empty());
  CHECK(m.headers["grpc-status"] == "12");
  CHECK(m.headers["grpc-message"] == "unknown method Nope for service test.Echo");
  CHECK(f.client.at(unknown_service).headers["grpc-message"] == "unknown service other.Service");
  CHECK(f.client.at(bad_type).headers[":status"] == "415");
  CHECK(f.client.at(bad_type).headers["grpc-status"] == "13");
  CHECK(f.client.at(plus_type).trailers["grpc-status"] == "0");
  CHECK(f.client.at(bad_timeout).headers["grpc-status"] == "13");
  CHECK(f.client.at(bad_encoding).headers["grpc-status"] == "12");
}

TEST_CASE("a large request spans DATA frames and windows; the receive limit is RESOURCE_EXHAUSTED") {
  fixture f(sg::call_limits{.max_recv_message_bytes = 400'000});
  auto big = f.call(request_body(std::string(300'000, 'a')));
  auto too_big = f.call(request_body(std::string(500'000, 'a')));
  f.pump();
  CHECK(f.client.at(big).trailers["grpc-status"] == "0");
  CHECK(f.client.at(too_big).headers["grpc-status"] == "8");
}

TEST_CASE("gzip-compressed requests") {
  fixture f;
  health_request r;
  r.set_service("zipped");
  auto id = f.call(h2_client::frame(gzip(r.SerializeAsString()), true), {{"grpc-encoding", "gzip"}});
  f.pump();
  CHECK(f.client.at(id).trailers["grpc-status"] == "0");
}

TEST_CASE("past grpc-timeout the call is DEADLINE_EXCEEDED and the late answer is dropped") {
  fixture f;
  auto id = f.call(request_body("hold"), {{"grpc-timeout", "20m"}});
  f.pump();
  REQUIRE(f.held);
  CHECK_FALSE(f.client.at(id).closed);
  f.io.run_for(60ms);
  f.pump();
  CHECK(f.client.at(id).headers["grpc-status"] == "4");
  CHECK(f.cancelled);
  CHECK(f.held->done());
  health_response late;
  f.held->reply(late);  // dropped
  f.pump();
  CHECK(f.client.at(id).body.empty());
}

TEST_CASE("RST_STREAM from the client cancels the call; its answer is dropped") {
  fixture f;
  auto id = f.call(request_body("hold"));
  f.pump();
  REQUIRE(f.held);
  f.client.reset(id);
  f.pump();
  CHECK(f.cancelled);
  CHECK(f.held->done());
  health_response late;
  f.held->reply(late);
  f.pump();
  CHECK(f.client.at(id).body.empty());
}

TEST_CASE("a closed connection cancels the calls still open") {
  fixture f;
  f.call(request_body("hold"));
  f.pump();
  REQUIRE(f.held);
  f.server.reset();
  CHECK(f.cancelled);
  CHECK(f.held->done());
}

TEST_CASE("garbage instead of the connection preface breaks the connection") {
  boost::asio::io_context io;
  sg::method_table methods;
  grpc_server_side server(io, methods);
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  CHECK_FALSE(server.session().feed({reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size()}));
  std::string out;
  server.session().drain(out);
  CHECK(server.session().finished());
}
