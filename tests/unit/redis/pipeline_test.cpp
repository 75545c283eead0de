#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "redis/error.hpp"
#include "redis/pipeline.hpp"

using namespace sluice::redis;
using boost::system::error_code;

namespace {

// What a request's `done` was called with.
struct outcome {
  int calls = 0;
  error_code ec;
  std::vector<value> replies;
};

std::string encode(std::initializer_list<std::string_view> command) {
  request r;
  r.push(command);
  return r.payload();
}

std::shared_ptr<pending_request> make_request(std::string payload, std::size_t expected, outcome& out) {
  auto r = std::make_shared<pending_request>();
  r->payload = std::move(payload);
  r->expected_replies = expected;
  r->done = [&out](error_code ec, std::vector<value>&& replies) {
    ++out.calls;
    out.ec = ec;
    out.replies = std::move(replies);
  };
  return r;
}

// Feeds `data` in one call, expecting all of it to be consumed without error.
void read_all(pipeline& p, std::string_view data) {
  error_code ec;
  CHECK(p.on_read(data, ec) == data.size());
  CHECK_MESSAGE(!ec, p.last_parse_error());
}

}  // namespace

TEST_CASE("error: the redis category names each code") {
  error_code ec = error::request_timeout;
  CHECK(ec.category().name() == std::string("redis"));
  CHECK(ec.message() == "Redis request timed out");
  CHECK(ec == make_error_code(error::request_timeout));
  CHECK(ec != make_error_code(error::connect_timeout));
  CHECK(make_error_code(error::protocol_error).message() == "Redis protocol error");
  CHECK(make_error_code(error::connection_lost).message() == "Redis connection lost before the reply");
  CHECK(make_error_code(error::shutting_down).message() == "Redis client is shutting down");
}

TEST_CASE("pipeline: queued requests leave in one coalesced write, in order") {
  pipeline p;
  outcome a, b, c;
  const std::string pa = encode({"GET", "a"}), pb = encode({"GET", "b"}), pc = encode({"GET", "c"});
  p.enqueue(make_request(pa, 1, a));
  p.enqueue(make_request(pb, 1, b));
  p.enqueue(make_request(pc, 1, c));
  CHECK(p.has_unwritten());
  CHECK(p.prepare_write() == pa + pb + pc);
  CHECK(p.written() == 3);
  CHECK_FALSE(p.has_unwritten());
  CHECK(p.prepare_write().empty());
  CHECK(p.size() == 3);
  CHECK(a.calls + b.calls + c.calls == 0);
}

TEST_CASE("pipeline: max_requests bounds one write") {
  pipeline p;
  outcome a, b, c;
  p.enqueue(make_request("A", 1, a));
  p.enqueue(make_request("B", 1, b));
  p.enqueue(make_request("C", 1, c));
  CHECK(p.prepare_write(2) == "AB");
  CHECK(p.written() == 2);
  CHECK(p.has_unwritten());
  CHECK(p.prepare_write(2) == "C");
  CHECK(p.written() == 3);
}

TEST_CASE("pipeline: replies are matched FIFO across requests with different reply counts") {
  pipeline p;
  outcome a, b, c;
  std::vector<char> order;
  auto ra = make_request("A", 2, a);
  auto rb = make_request("B", 1, b);
  auto rc = make_request("C", 3, c);
  for (auto* r : {ra.get(), rb.get(), rc.get()}) {
    r->done = [&order, r, done = std::move(r->done)](error_code ec, std::vector<value>&& v) {
      order.push_back(r->payload[0]);
      done(ec, std::move(v));
    };
  }
  p.enqueue(ra);
  p.enqueue(rb);
  p.enqueue(rc);
  p.prepare_write();
  read_all(p, ":1\r\n:2\r\n+OK\r\n:3\r\n$-1\r\n$3\r\nabc\r\n");
  CHECK(order == std::vector<char>{'A', 'B', 'C'});
  REQUIRE(a.replies.size() == 2);
  CHECK(a.replies[0].integer == 1);
  CHECK(a.replies[1].integer == 2);
  REQUIRE(b.replies.size() == 1);
  CHECK(b.replies[0].text == "OK");
  REQUIRE(c.replies.size() == 3);
  CHECK(c.replies[0].integer == 3);
  CHECK(c.replies[1].type == value::kind::null);
  CHECK(c.replies[2].text == "abc");
  CHECK((a.calls == 1 && b.calls == 1 && c.calls == 1));
  CHECK((!a.ec && !b.ec && !c.ec));
  CHECK(p.size() == 0);
  CHECK(p.written() == 0);
}

TEST_CASE("pipeline: replies arriving in pieces, split at every byte") {
  const std::string stream = ":10\r\n*2\r\n$5\r\nhello\r\n:7\r\n-ERR bad\r\n";
  const std::size_t a_end = stream.find("-ERR");
  for (std::size_t piece = 1; piece <= stream.size(); ++piece) {
    CAPTURE(piece);
    pipeline p;
    outcome a, b;
    p.enqueue(make_request("A", 2, a));
    p.enqueue(make_request("B", 1, b));
    p.prepare_write();
    // A reader loop: append what arrived, keep what was not consumed.
    std::string buffer;
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      buffer += stream.substr(at, piece);
      error_code ec;
      buffer.erase(0, p.on_read(buffer, ec));
      REQUIRE_FALSE(ec);
      // A completes exactly when its second reply ("*2...:7") is entirely in.
      CHECK(a.calls == (at + piece >= a_end ? 1 : 0));
    }
    CHECK(buffer.empty());
    CHECK(a.calls == 1);
    CHECK(b.calls == 1);
    REQUIRE(a.replies.size() == 2);
    CHECK(a.replies[0].integer == 10);
    REQUIRE(a.replies[1].elements.size() == 2);
    CHECK(a.replies[1].elements[0].text == "hello");
    CHECK(a.replies[1].elements[1].integer == 7);
    REQUIRE(b.replies.size() == 1);
    CHECK(b.replies[0].is_error());
  }
}

TEST_CASE("pipeline: incomplete data consumes nothing and completes nothing") {
  pipeline p;
  outcome a;
  p.enqueue(make_request("A", 1, a));
  p.prepare_write();
  error_code ec;
  CHECK(p.on_read("$5\r\nhel", ec) == 0);
  CHECK_FALSE(ec);
  CHECK(a.calls == 0);
  CHECK(p.on_read("$5\r\nhello\r\n", ec) == 11);
  CHECK(a.calls == 1);
}

TEST_CASE("pipeline: a Redis error reply completes its request as a value") {
  pipeline p;
  outcome a, b;
  p.enqueue(make_request("A", 1, a));
  p.enqueue(make_request("B", 1, b));
  p.prepare_write();
  read_all(p, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:5\r\n");
  CHECK(a.calls == 1);
  CHECK_FALSE(a.ec);
  REQUIRE(a.replies.size() == 1);
  CHECK(a.replies[0].is_error());
  CHECK(a.replies[0].text.starts_with("WRONGTYPE"));
  REQUIRE(b.replies.size() == 1);
  CHECK(b.replies[0].integer == 5);
}

TEST_CASE("pipeline: a disconnect fails written requests and keeps unwritten ones") {
  pipeline p;
  outcome a, b, c;
  auto ra = make_request("A", 2, a);
  p.enqueue(ra);
  p.enqueue(make_request("B", 1, b));
  CHECK(p.prepare_write() == "AB");
  p.enqueue(make_request("C", 1, c));
  read_all(p, ":1\r\n");  // A has one of its two replies
  p.on_disconnect(error::connection_lost);
  CHECK(a.calls == 1);
  CHECK(a.ec == error::connection_lost);
  CHECK(a.replies.empty());
  CHECK(ra->replies.empty());  // a retry of the same request must not start with a stale reply
  CHECK(b.calls == 1);
  CHECK(b.ec == error::connection_lost);
  CHECK(c.calls == 0);
  CHECK(p.size() == 1);
  CHECK(p.written() == 0);
  CHECK(p.has_unwritten());
  // The next connection sends what was kept, and its replies start afresh.
  CHECK(p.prepare_write() == "C");
  read_all(p, ":3\r\n");
  CHECK(c.calls == 1);
  CHECK_FALSE(c.ec);
  REQUIRE(c.replies.size() == 1);
  CHECK(c.replies[0].integer == 3);
}

TEST_CASE("pipeline: fail_all fails written and unwritten requests") {
  pipeline p;
  outcome a, b;
  p.enqueue(make_request("A", 1, a));
  p.prepare_write();
  p.enqueue(make_request("B", 1, b));
  p.fail_all(error::shutting_down);
  CHECK(a.calls == 1);
  CHECK(a.ec == error::shutting_down);
  CHECK(b.calls == 1);
  CHECK(b.ec == error::shutting_down);
  CHECK(p.size() == 0);
  CHECK(p.written() == 0);
  CHECK_FALSE(p.has_unwritten());
  CHECK(p.prepare_write().empty());
}

TEST_CASE("pipeline: cancel_unwritten withdraws only requests not yet written") {
  pipeline p;
  outcome a, b, c;
  auto ra = make_request("A", 1, a);
  auto rb = make_request("B", 1, b);
  auto rc = make_request("C", 1, c);
  p.enqueue(ra);
  p.prepare_write();
  p.enqueue(rb);
  p.enqueue(rc);
  CHECK_FALSE(p.cancel_unwritten(ra.get(), error::request_timeout));
  CHECK(a.calls == 0);
  CHECK(p.cancel_unwritten(rb.get(), error::request_timeout));
  CHECK(b.calls == 1);
  CHECK(b.ec == error::request_timeout);
  CHECK(p.size() == 2);
  CHECK_FALSE(p.cancel_unwritten(rb.get(), error::request_timeout));
  CHECK(b.calls == 1);
  pending_request stranger;
  CHECK_FALSE(p.cancel_unwritten(&stranger, error::request_timeout));
  CHECK(p.prepare_write() == "C");
  read_all(p, ":1\r\n:2\r\n");
  CHECK(a.replies[0].integer == 1);
  CHECK(c.replies[0].integer == 2);
}

TEST_CASE("pipeline: replies of a request whose caller gave up are dropped, matching goes on") {
  pipeline p;
  outcome a, b;
  auto ra = make_request("A", 2, a);
  p.enqueue(ra);
  p.enqueue(make_request("B", 1, b));
  p.prepare_write();
  read_all(p, ":1\r\n");
  ra->done = nullptr;  // the request timed out after its first reply
  read_all(p, ":2\r\n:3\r\n");
  CHECK(a.calls == 0);
  CHECK(ra->replies.empty());
  CHECK(b.calls == 1);
  REQUIRE(b.replies.size() == 1);
  CHECK(b.replies[0].integer == 3);
  CHECK(p.size() == 0);
}

TEST_CASE("pipeline: what a done callback captured is released once it has been called") {
  pipeline p;
  outcome a, b;
  auto captured = std::make_shared<int>(0);
  auto ra = make_request("A", 1, a);
  auto rb = make_request("B", 1, b);
  for (auto* r : {ra.get(), rb.get()}) {
    r->done = [captured, done = std::move(r->done)](error_code ec, std::vector<value>&& v) {
      done(ec, std::move(v));
    };
  }
  p.enqueue(ra);
  p.enqueue(rb);
  p.prepare_write();
  CHECK(captured.use_count() == 3);
  read_all(p, ":1\r\n");
  CHECK(captured.use_count() == 2);
  p.on_disconnect(error::connection_lost);
  CHECK(captured.use_count() == 1);
  CHECK((a.calls == 1 && b.calls == 1));
}

TEST_CASE("pipeline: a done callback may enqueue a request") {
  pipeline p;
  outcome a, b, c;
  auto ra = make_request("A", 1, a);
  auto rc = make_request("C", 1, c);
  std::size_t size_inside = 99;
  ra->done = [&, done = std::move(ra->done)](error_code ec, std::vector<value>&& v) {
    size_inside = p.size();
    p.enqueue(rc);
    done(ec, std::move(v));
  };
  p.enqueue(ra);
  p.enqueue(make_request("B", 1, b));
  p.prepare_write();
  // Both replies in one read: the second must go to B, not to C that A's callback just queued.
  read_all(p, ":1\r\n:2\r\n");
  CHECK(size_inside == 1);  // A was already out of the queue
  CHECK(a.calls == 1);
  REQUIRE(b.replies.size() == 1);
  CHECK(b.replies[0].integer == 2);
  CHECK(c.calls == 0);
  CHECK(p.has_unwritten());
  CHECK(p.prepare_write() == "C");
  read_all(p, ":3\r\n");
  REQUIRE(c.replies.size() == 1);
  CHECK(c.replies[0].integer == 3);
}

TEST_CASE("pipeline: a reply nobody waits for is a protocol error") {
  pipeline p;
  error_code ec;
  CHECK(p.on_read(":1\r\n", ec) == 0);
  CHECK(ec == error::protocol_error);
  CHECK(p.last_parse_error() == "unexpected reply: no request is waiting for one");

  outcome a, b;
  p.enqueue(make_request("A", 1, a));
  p.prepare_write();
  p.enqueue(make_request("B", 1, b));  // not written: it cannot take the extra reply
  CHECK(p.on_read(":1\r\n:2\r\n", ec) == 4);
  CHECK(ec == error::protocol_error);
  CHECK(a.calls == 1);
  CHECK(b.calls == 0);
}

TEST_CASE("pipeline: bytes that are not RESP are a protocol error") {
  pipeline p;
  outcome a, b;
  p.enqueue(make_request("A", 1, a));
  p.enqueue(make_request("B", 1, b));
  p.prepare_write();
  error_code ec;
  CHECK(p.on_read(":1\r\n?oops\r\n", ec) == 4);
  CHECK(ec == error::protocol_error);
  CHECK(p.last_parse_error() == "unknown RESP type byte '?' (0x3f)");
  CHECK(a.calls == 1);
  CHECK(b.calls == 0);
  // A later successful read clears the code.
  outcome c;
  p.on_disconnect(error::connection_lost);
  p.enqueue(make_request("C", 1, c));
  p.prepare_write();
  CHECK(p.on_read(":1\r\n", ec) == 4);
  CHECK_FALSE(ec);
}

TEST_CASE("pipeline: a request expecting no reply completes when written") {
  pipeline p;
  outcome a, z, b;
  p.enqueue(make_request("A", 1, a));
  p.enqueue(make_request("Z", 0, z));
  p.enqueue(make_request("B", 1, b));
  CHECK(z.calls == 0);
  CHECK(p.prepare_write() == "AZB");
  CHECK(z.calls == 1);
  CHECK_FALSE(z.ec);
  CHECK(z.replies.empty());
  CHECK(p.written() == 2);
  CHECK(p.size() == 2);
  read_all(p, ":1\r\n:2\r\n");
  CHECK(a.replies[0].integer == 1);
  CHECK(b.replies[0].integer == 2);
}

TEST_CASE("pipeline: prepare_write called from a no-reply done defers to the next write") {
  pipeline p;
  outcome z, c;
  auto rz = make_request("Z", 0, z);
  std::string inner = "unset";
  rz->done = [&, done = std::move(rz->done)](error_code ec, std::vector<value>&& v) {
    p.enqueue(make_request("C", 1, c));
    inner = p.prepare_write();
    done(ec, std::move(v));
  };
  p.enqueue(rz);
  CHECK(p.prepare_write() == "Z");
  CHECK(inner.empty());
  CHECK(z.calls == 1);
  CHECK(p.has_unwritten());
  CHECK(p.prepare_write() == "C");
}
