#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "memcache/client.hpp"
#include "memcache/error.hpp"
#include "memcache/pipeline.hpp"

using namespace sluice::memcache;

namespace {

struct outcome {
  bool called = false;
  boost::system::error_code ec;
  std::vector<reply> replies;
};

std::shared_ptr<pending_request> request(std::string payload, std::vector<reply_kind> kinds, outcome& o) {
  auto r = std::make_shared<pending_request>();
  r->payload = std::move(payload);
  r->expected = std::move(kinds);
  r->done = [&o](boost::system::error_code ec, std::vector<reply>&& replies) {
    CHECK_FALSE(o.called);
    o.called = true;
    o.ec = ec;
    o.replies = std::move(replies);
  };
  return r;
}

}  // namespace

TEST_CASE("requests queued together leave in one write and get their replies in order, whatever the reads") {
  pipeline p;
  outcome a, b;
  p.enqueue(request("get k1 k2\r\nincr k1 1\r\nincr k2 1\r\n",
                    {reply_kind::values, reply_kind::incr, reply_kind::incr}, a));
  p.enqueue(request("add k3 0 60 1\r\n1\r\n", {reply_kind::store}, b));
  CHECK(p.prepare_write() == "get k1 k2\r\nincr k1 1\r\nincr k2 1\r\nadd k3 0 60 1\r\n1\r\n");
  CHECK_FALSE(p.has_unwritten());
  const std::string replies = "VALUE k1 0 1\r\n5\r\nEND\r\n6\r\nNOT_FOUND\r\nSTORED\r\n";
  // One byte at a time: nothing is completed early or decoded twice.
  std::string buffer;
  boost::system::error_code ec;
  for (char c : replies) {
    buffer += c;
    buffer.erase(0, p.on_read(buffer, ec));
    REQUIRE_FALSE(ec);
  }
  CHECK(buffer.empty());
  REQUIRE(a.called);
  REQUIRE(a.replies.size() == 3);
  CHECK(a.replies[0].items.size() == 1);
  CHECK(a.replies[0].items[0].data == "5");
  CHECK(a.replies[1].number == 6);
  CHECK(a.replies[2].result == reply::status::not_found);
  REQUIRE(b.called);
  CHECK(b.replies[0].result == reply::status::stored);
  CHECK(p.size() == 0);
}

TEST_CASE("a reply nobody asked for, or one of the wrong kind, is a protocol error") {
  pipeline p;
  boost::system::error_code ec;
  CHECK(p.on_read("STORED\r\n", ec) == 0);
  CHECK(ec == error::protocol_error);
  outcome a;
  p.enqueue(request("incr k 1\r\n", {reply_kind::incr}, a));
  p.prepare_write();
  p.on_read("STORED\r\n", ec);
  CHECK(ec == error::protocol_error);
  CHECK(p.last_parse_error() == "memcached sent an unexpected reply to incr");
  CHECK_FALSE(a.called);
}

TEST_CASE("a lost connection fails what was written and keeps what was not") {
  pipeline p;
  outcome written, waiting;
  p.enqueue(request("incr a 1\r\n", {reply_kind::incr}, written));
  p.prepare_write();
  p.enqueue(request("incr b 1\r\n", {reply_kind::incr}, waiting));
  p.on_disconnect(error::connection_lost);
  CHECK(written.called);
  CHECK(written.ec == error::connection_lost);
  CHECK_FALSE(waiting.called);
  CHECK(p.prepare_write() == "incr b 1\r\n");
  p.fail_all(error::shutting_down);
  CHECK(waiting.ec == error::shutting_down);
}

TEST_CASE("only a request not written yet can be cancelled") {
  pipeline p;
  outcome written, waiting;
  auto w = request("incr a 1\r\n", {reply_kind::incr}, written);
  p.enqueue(w);
  p.prepare_write();
  auto u = request("incr b 1\r\n", {reply_kind::incr}, waiting);
  p.enqueue(u);
  CHECK_FALSE(p.cancel_unwritten(w.get(), error::request_timeout));
  CHECK(p.cancel_unwritten(u.get(), error::request_timeout));
  CHECK(waiting.ec == error::request_timeout);
  CHECK_FALSE(p.has_unwritten());
}

TEST_CASE(
    "keys go to the node gomemcache picks: CRC-32 (IEEE) of the key's first 256 bytes, modulo the nodes") {
  // Expected values from Python's zlib.crc32, the same CRC as Go's crc32.ChecksumIEEE.
  CHECK(pick_server("foo", 1) == 0);
  CHECK(pick_server("foo", 3) == 2356372769u % 3);
  CHECK(pick_server("domain_key_value_1234", 3) == 3052031685u % 3);
  CHECK(pick_server("domain_key_value_1234", 2) == 3052031685u % 2);
  CHECK(pick_server(std::string(300, 'x'), 3) == 1944984080u % 3);
  CHECK(pick_server(std::string(300, 'x'), 2) == 1944984080u % 2);
}
