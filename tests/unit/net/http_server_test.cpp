#include <doctest/doctest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "net/http/router.hpp"
#include "net/http/server.hpp"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;
using sluice::net::http::json_error;
using sluice::net::http::make_response;
using sluice::net::http::request;
using sluice::net::http::response;
using sluice::net::http::router;
using sluice::net::http::server;
using sluice::net::http::server_options;

namespace {

std::shared_ptr<router> make_routes(std::atomic<bool>& slow_entered) {
  auto routes = std::make_shared<router>();
  routes->add("/hello", [](const request& req) -> asio::awaitable<response> {
    co_return make_response(req, bhttp::status::ok, "text/plain", "hello");
  });
  routes->add("/echo", [](const request& req) -> asio::awaitable<response> {
    co_return make_response(req, bhttp::status::ok, "application/octet-stream", req.body());
  });
  routes->add("/slow", [&slow_entered](const request& req) -> asio::awaitable<response> {
    slow_entered = true;
    asio::steady_timer timer(co_await asio::this_coro::executor, 200ms);
    co_await timer.async_wait(asio::use_awaitable);
    co_return make_response(req, bhttp::status::ok, "text/plain", "slow done");
  });
  routes->add("/throw", [](const request&) -> asio::awaitable<response> {
    throw std::runtime_error("secret detail");
    co_return response{};
  });
  return routes;
}

// An in-process server on 127.0.0.1 with an ephemeral port, its io_context on two threads.
struct test_server {
  std::atomic<bool> slow_entered{false};
  asio::io_context ioc;
  server srv;
  tcp::endpoint endpoint;
  std::vector<std::thread> threads;

  explicit test_server(server_options options = {}) : srv(ioc, local(options), make_routes(slow_entered)) {
    endpoint = srv.listen();
    srv.start();
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { ioc.run(); });
  }
  ~test_server() {
    srv.stop();
    ioc.stop();
    for (auto& t : threads) t.join();
  }
  static server_options local(server_options options) {
    options.host = "127.0.0.1";
    options.port = 0;
    return options;
  }
  // Polls for a condition the server reaches asynchronously.
  bool wait_for_connections(std::size_t n) const {
    for (auto deadline = std::chrono::steady_clock::now() + 2s;
         std::chrono::steady_clock::now() < deadline;) {
      if (srv.open_connections() == n) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
};

// A blocking-looking client whose every operation has a deadline, so a broken server fails a test instead of
// hanging it.
struct client {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;

  error_code connect(const tcp::endpoint& endpoint) {
    error_code result;
    stream.expires_after(5s);
    stream.async_connect(endpoint, [&](error_code ec) { result = ec; });
    run();
    return result;
  }
  error_code send(const std::string& bytes) {
    error_code result;
    stream.expires_after(5s);
    asio::async_write(stream, asio::buffer(bytes), [&](error_code ec, std::size_t) { result = ec; });
    run();
    return result;
  }
  error_code receive(response& res) {
    error_code result;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(16 * 1024 * 1024);
    stream.expires_after(5s);
    bhttp::async_read(stream, buffer, parser, [&](error_code ec, std::size_t) { result = ec; });
    run();
    if (!result) res = parser.release();
    return result;
  }
  response request(const std::string& bytes) {
    REQUIRE_FALSE(send(bytes));
    response res;
    REQUIRE_FALSE(receive(res));
    return res;
  }
  // True when the server closed the connection cleanly (FIN, no reset, no timeout).
  bool closed_by_server() {
    response res;
    return receive(res) == bhttp::error::end_of_stream;
  }
  void run() {
    ioc.restart();
    ioc.run();
  }
};

std::string get(const std::string& target) {
  return "GET " + target + " HTTP/1.1\r\nHost: test\r\n\r\n";
}

std::string post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: test\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

}  // namespace

TEST_CASE("router matches the exact path and ignores the query") {
  router routes;
  int called = 0;
  routes.add("/a", [&called](const request& req) -> asio::awaitable<response> {
    ++called;
    co_return make_response(req, bhttp::status::ok, "text/plain", "a");
  });
  CHECK(routes.find("/a") != nullptr);
  CHECK(routes.find("/a?x=1&y=2") == routes.find("/a"));
  CHECK(routes.find("/a/") == nullptr);
  CHECK(routes.find("/ab") == nullptr);
  CHECK(routes.find("/") == nullptr);
  CHECK(routes.find("") == nullptr);
}

TEST_CASE("router: exact routes first, then the longest matching prefix, then the fallback") {
  router routes;
  auto answer = [](std::string body) {
    return [body](const request& req) -> asio::awaitable<response> {
      co_return make_response(req, bhttp::status::ok, "text/plain", body);
    };
  };
  routes.add("/events/holidays.json", answer("exact"));
  routes.add_prefix("/events/", answer("short"));
  routes.add_prefix("/events/holidays", answer("long"));
  const sluice::net::http::handler* exact = routes.find("/events/holidays.json?key=1");
  const sluice::net::http::handler* long_prefix = routes.find("/events/holidays.csv");
  const sluice::net::http::handler* short_prefix = routes.find("/events/other");
  REQUIRE(exact != nullptr);
  REQUIRE(long_prefix != nullptr);
  REQUIRE(short_prefix != nullptr);
  CHECK(exact != long_prefix);
  CHECK(long_prefix != short_prefix);
  CHECK(routes.find("/events/holidays?callback=x") == long_prefix);
  CHECK(routes.find("/event") == nullptr);
  routes.set_fallback(answer("fallback"));
  const sluice::net::http::handler* fallback = routes.find("/event");
  REQUIRE(fallback != nullptr);
  CHECK(fallback != short_prefix);
}

TEST_CASE("json_error escapes the message and keeps it valid UTF-8") {
  request req{bhttp::verb::get, "/", 11};
  response res = json_error(req, bhttp::status::bad_request, "say \"hi\"\\\n\x01 caf\xc3\xa9 \xff\xc3");
  CHECK(res.result() == bhttp::status::bad_request);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res.body() ==
        "{\"code\":400,\"message\":\"say \\\"hi\\\"\\\\\\n\\u0001 caf\xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\"}");
  CHECK(res[bhttp::field::content_length] == std::to_string(res.body().size()));
  // Overlong encodings and surrogates are not UTF-8 either.
  CHECK(json_error(req, bhttp::status::bad_request, "\xc0\xaf\xed\xa0\x80").body() ==
        "{\"code\":400,\"message\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}");
}

TEST_CASE("make_response copies version and keep-alive from the request") {
  request old_style{bhttp::verb::get, "/", 10};
  response res = make_response(old_style, bhttp::status::created, "text/csv", "a,b");
  CHECK(res.version() == 10);
  CHECK_FALSE(res.keep_alive());
  CHECK(res.result() == bhttp::status::created);
  CHECK(res[bhttp::field::content_type] == "text/csv");
  CHECK(res[bhttp::field::content_length] == "3");

  old_style.keep_alive(true);
  CHECK(make_response(old_style, bhttp::status::ok, "text/plain", "").keep_alive());

  request closing{bhttp::verb::get, "/", 11};
  closing.keep_alive(false);
  res = make_response(closing, bhttp::status::ok, "text/plain", "x");
  CHECK(res.version() == 11);
  CHECK(res[bhttp::field::connection] == "close");
}

TEST_CASE("routed GET and POST return the handler's response") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));

  response res = c.request(get("/hello?name=x"));
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res.body() == "hello");
  CHECK(res[bhttp::field::content_type] == "text/plain");
  CHECK(res.version() == 11);
  CHECK(res.keep_alive());

  res = c.request(post("/echo", "ping {\"a\":1}"));
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res.body() == "ping {\"a\":1}");
  CHECK(res[bhttp::field::content_length] == "12");
}

TEST_CASE("keep-alive serves several requests on one connection, Connection: close ends it") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  CHECK(c.request(get("/hello")).body() == "hello");
  CHECK(c.request(post("/echo", "second")).body() == "second");
  CHECK(ts.srv.open_connections() == 1);

  response res = c.request("GET /hello HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
  CHECK(res.body() == "hello");
  CHECK_FALSE(res.keep_alive());
  CHECK(c.closed_by_server());
  CHECK(ts.wait_for_connections(0));
}

TEST_CASE("pipelined requests are answered in order") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  REQUIRE_FALSE(c.send(post("/echo", "one") + post("/echo", "two")));
  response first, second;
  REQUIRE_FALSE(c.receive(first));
  REQUIRE_FALSE(c.receive(second));
  CHECK(first.body() == "one");
  CHECK(second.body() == "two");
}

TEST_CASE("unknown path gives a 404 JSON error naming method and path") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  response res = c.request(get("/nope?x=1"));
  CHECK(res.result() == bhttp::status::not_found);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res.body() == R"({"code":404,"message":"no route for GET /nope"})");
  CHECK(res.keep_alive());
  CHECK(c.request(get("/hello")).body() == "hello");

  res = c.request(get("/caf\xc3\xa9\xff"));
  CHECK(res.body() == "{\"code\":404,\"message\":\"no route for GET /caf\xc3\xa9\xef\xbf\xbd\"}");
}

TEST_CASE("body over the limit gives 413 and closes; a body at the limit is accepted") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  std::string at_limit(1024 * 1024, 'x');
  response res = c.request(post("/echo", at_limit));
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res.body().size() == at_limit.size());

  res = c.request(post("/echo", at_limit + "y"));
  CHECK(res.result() == bhttp::status::payload_too_large);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res.body() == R"({"code":413,"message":"request body is larger than 1048576 bytes"})");
  CHECK_FALSE(res.keep_alive());
  CHECK(c.closed_by_server());
}

TEST_CASE("chunked body over the limit gives 413") {
  server_options options;
  options.max_body_bytes = 10;
  test_server ts(options);
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  response res = c.request(
      "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
      "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
  CHECK(res.result() == bhttp::status::payload_too_large);
  CHECK(res.body() == R"({"code":413,"message":"request body is larger than 10 bytes"})");
  CHECK(c.closed_by_server());
}

TEST_CASE("header over the limit gives 431 and closes") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  response res =
      c.request("GET /hello HTTP/1.1\r\nHost: test\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n");
  CHECK(res.result() == bhttp::status::request_header_fields_too_large);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res.body() == R"({"code":431,"message":"request header is larger than 8192 bytes"})");
  CHECK(c.closed_by_server());
}

TEST_CASE("garbage gives 400 with the parser's reason and closes") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  response res = c.request("\x01\x02 not http\r\n\r\n");
  CHECK(res.result() == bhttp::status::bad_request);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res.body() == R"({"code":400,"message":"malformed HTTP request: bad method"})");
  CHECK(c.closed_by_server());
  CHECK(ts.wait_for_connections(0));
}

TEST_CASE("a throwing handler gives 500 without the exception text and keeps the connection") {
  test_server ts;
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  response res = c.request(get("/throw"));
  CHECK(res.result() == bhttp::status::internal_server_error);
  CHECK(res[bhttp::field::content_type] == "application/json");
  CHECK(res.body() == R"({"code":500,"message":"internal error"})");
  CHECK(c.request(get("/hello")).body() == "hello");
}

TEST_CASE("idle keep-alive connections close after the idle timeout") {
  server_options options;
  options.idle_timeout = 200ms;
  test_server ts(options);
  client fresh, used;
  REQUIRE_FALSE(fresh.connect(ts.endpoint));
  REQUIRE_FALSE(used.connect(ts.endpoint));
  auto start = std::chrono::steady_clock::now();
  CHECK(used.request(get("/hello")).body() == "hello");
  CHECK(ts.wait_for_connections(2));

  CHECK(fresh.closed_by_server());
  CHECK(used.closed_by_server());
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 150ms);
  CHECK(elapsed < 2s);
  CHECK(ts.wait_for_connections(0));
}

TEST_CASE("a started request is read under the read timeout, not the idle timeout") {
  server_options options;
  options.idle_timeout = 100ms;
  options.read_timeout = 2s;
  test_server ts(options);
  client c;
  REQUIRE_FALSE(c.connect(ts.endpoint));
  REQUIRE_FALSE(c.send("GET /hello HTTP/1.1\r\n"));
  std::this_thread::sleep_for(300ms);
  response res = c.request("Host: test\r\n\r\n");
  CHECK(res.body() == "hello");
}

TEST_CASE("stop lets an in-flight request finish with Connection: close and closes idle connections") {
  test_server ts;
  client busy, idle;
  REQUIRE_FALSE(busy.connect(ts.endpoint));
  REQUIRE_FALSE(idle.connect(ts.endpoint));
  CHECK(idle.request(get("/hello")).body() == "hello");
  REQUIRE_FALSE(busy.send(get("/slow")));
  for (int i = 0; i < 400 && !ts.slow_entered; ++i) std::this_thread::sleep_for(5ms);
  REQUIRE(ts.slow_entered);

  auto start = std::chrono::steady_clock::now();
  ts.srv.stop();
  CHECK(idle.closed_by_server());
  CHECK(std::chrono::steady_clock::now() - start < 150ms);  // closed by stop(), not after the slow handler

  response res;
  REQUIRE_FALSE(busy.receive(res));
  CHECK(res.result() == bhttp::status::ok);
  CHECK(res.body() == "slow done");
  CHECK(res[bhttp::field::connection] == "close");
  CHECK(busy.closed_by_server());

  client late;
  CHECK(late.connect(ts.endpoint) == asio::error::connection_refused);
  CHECK(ts.wait_for_connections(0));
}

TEST_CASE("listen failure names the address") {
  test_server ts;
  asio::io_context ioc;
  server_options options;
  options.host = "127.0.0.1";
  options.port = ts.endpoint.port();
  server second(ioc, options, std::make_shared<router>());
  std::string what;
  try {
    second.listen();
  } catch (const std::runtime_error& e) {
    what = e.what();
  }
  // Upstream's (Go's) words.
  CHECK(what == "listen tcp 127.0.0.1:" + std::to_string(options.port) + ": bind: address already in use");
}

TEST_CASE("a port another listener holds is refused even with SO_REUSEPORT; workers of one server share") {
  asio::io_context ioc;
  server_options options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.reuse_port = true;
  options.check_port_free = true;
  server first(ioc, options, std::make_shared<router>());
  options.port = first.listen().port();
  // The first server's other workers: the same port, without the check.
  options.check_port_free = false;
  server first_worker_two(ioc, options, std::make_shared<router>());
  CHECK(first_worker_two.listen().port() == options.port);
  // Another process's first socket, which SO_REUSEPORT alone would let in beside them.
  options.check_port_free = true;
  server intruder(ioc, options, std::make_shared<router>());
  CHECK_THROWS_WITH_AS(
      intruder.listen(),
      ("listen tcp 127.0.0.1:" + std::to_string(options.port) + ": bind: address already in use").c_str(),
      std::runtime_error);
}
