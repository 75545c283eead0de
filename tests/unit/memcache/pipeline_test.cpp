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

std::shared_ptr<pending_request> request(std::string payload, std::vector<reply_kind> kinds, outcome& o,
                                         std::vector<std::string_view> get_keys = {}) {
  auto r = std::make_shared<pending_request>();
  for (auto key : get_keys) add_get_key(r->get_keys, key);
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
  p.enqueue(request("incr k1 1\r\nincr k2 1\r\n", {reply_kind::incr, reply_kind::incr}, a, {"k1", "k2"}));
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

TEST_CASE("the get-multis of requests written together are one get, its hits dealt back by key and order") {
  pipeline p;
  outcome a, b, c, d;
  p.enqueue(request("incr x 1\r\n", {reply_kind::incr}, a, {"x", "y"}));
  p.enqueue(request("decr z 1\r\n", {reply_kind::incr}, b));  // asks for no key
  p.enqueue(request("", {}, c, {"y", "x"}));                  // a get alone: done with the get's reply
  p.enqueue(request("incr y 2\r\n", {reply_kind::incr}, d, {"y"}));
  CHECK(p.prepare_write() == "get x y y x y\r\nincr x 1\r\ndecr z 1\r\nincr y 2\r\n");
  boost::system::error_code ec;
  // x is absent: memcached answers the three y's only, in the order asked.
  const std::string values = "VALUE y 0 1\r\n1\r\nVALUE y 0 1\r\n2\r\nVALUE y 0 1\r\n3\r\nEND\r\n";
  CHECK(p.on_read(values, ec) == values.size());
  REQUIRE_FALSE(ec);
  CHECK_FALSE(c.called);  // it waits for the requests before it
  CHECK(p.on_read("1\r\n", ec) == 3);
  REQUIRE(a.called);
  REQUIRE(a.replies.size() == 2);
  REQUIRE(a.replies[0].items.size() == 1);
  CHECK(a.replies[0].items[0].data == "1");
  CHECK(a.replies[1].number == 1);
  CHECK_FALSE(b.called);
  CHECK(p.on_read("0\r\n4\r\n", ec) == 6);
  REQUIRE(b.called);
  CHECK(b.replies.size() == 1);
  REQUIRE(c.called);
  REQUIRE(c.replies.size() == 1);
  REQUIRE(c.replies[0].items.size() == 1);
  CHECK(c.replies[0].items[0].data == "2");
  REQUIRE(d.called);
  REQUIRE(d.replies.size() == 2);
  CHECK(d.replies[0].items[0].data == "3");
  CHECK(d.replies[1].number == 4);
  CHECK(p.size() == 0);
}

TEST_CASE("an error answering the merged get is every asker's reply") {
  pipeline p;
  outcome a, b;
  p.enqueue(request("incr x 1\r\n", {reply_kind::incr}, a, {"x"}));
  p.enqueue(request("", {}, b, {"y"}));
  p.prepare_write();
  boost::system::error_code ec;
  p.on_read("SERVER_ERROR out of memory\r\n1\r\n", ec);
  REQUIRE_FALSE(ec);
  REQUIRE(a.called);
  CHECK(a.replies[0].result == reply::status::server_error);
  CHECK(a.replies[0].message == "out of memory");
  CHECK(a.replies[1].number == 1);
  REQUIRE(b.called);
  CHECK(b.replies[0].result == reply::status::server_error);
}

TEST_CASE("each write's get stops short of memcached's line buffer; the next keys go into another get") {
  pipeline p;
  outcome o[3];
  const std::string key(250, 'k');
  std::string payloads;
  for (auto& each : o) {
    std::vector<std::string_view> keys(12, key);  // 12 x 251 bytes: two requests fit in 8 KiB, not three
    p.enqueue(request("incr " + key + " 1\r\n", {reply_kind::incr}, each, keys));
  }
  const std::string written(p.prepare_write());
  const std::string get_line = "get" + [&] {
    std::string s;
    for (int i = 0; i < 24; ++i) s += " " + key;
    return s;
  }() + "\r\n";
  const std::string incr = "incr " + key + " 1\r\n";
  std::string second_get = "get";
  for (int i = 0; i < 12; ++i) second_get += " " + key;
  second_get += "\r\n";
  CHECK(written == get_line + incr + incr + second_get + incr);
  boost::system::error_code ec;
  p.on_read("END\r\n1\r\n2\r\nEND\r\n3\r\n", ec);
  REQUIRE_FALSE(ec);
  for (auto& each : o) CHECK(each.called);
  CHECK(o[2].replies[1].number == 3);
}

TEST_CASE("a merged get answered with a key not asked for, or out of order, is a protocol error") {
  for (const std::string values :
       {"VALUE z 0 1\r\n1\r\nEND\r\n", "VALUE b 0 1\r\n1\r\nVALUE a 0 1\r\n1\r\nEND\r\n"}) {
    pipeline p;
    outcome a;
    p.enqueue(request("", {}, a, {"a", "b"}));
    p.prepare_write();
    boost::system::error_code ec;
    p.on_read(values, ec);
    CHECK(ec == error::protocol_error);
    CHECK(p.last_parse_error().starts_with("memcached answered get with key '"));
    p.on_disconnect(error::connection_lost);
    CHECK(a.ec == error::connection_lost);
  }
}

TEST_CASE("a lost connection forgets the merged gets in flight: the next connection's replies start afresh") {
  pipeline p;
  outcome lost, next;
  p.enqueue(request("", {}, lost, {"a"}));
  p.prepare_write();
  p.on_disconnect(error::connection_lost);
  CHECK(lost.ec == error::connection_lost);
  p.enqueue(request("incr a 1\r\n", {reply_kind::incr}, next));
  CHECK(p.prepare_write() == "incr a 1\r\n");
  boost::system::error_code ec;
  p.on_read("7\r\n", ec);
  REQUIRE_FALSE(ec);
  REQUIRE(next.called);
  CHECK(next.replies[0].number == 7);
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
