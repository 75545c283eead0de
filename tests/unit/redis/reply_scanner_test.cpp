// redis::reply_scanner: where a reply ends, seen once; and the pipeline that uses it decodes a large reply
// arriving in small reads in linear time.

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>

#include "redis/pipeline.hpp"
#include "redis/reply_scanner.hpp"
#include "redis/resp.hpp"

using namespace sluice::redis;

namespace {

// Feeds `reply` one more byte at a time; returns the length at which the scanner first said ready.
std::size_t ready_at(const std::string& reply) {
  reply_scanner s;
  for (std::size_t n = 0; n <= reply.size(); ++n)
    if (s.ready(std::string_view(reply).substr(0, n))) return n;
  return std::string::npos;
}

}  // namespace

TEST_CASE("reply_scanner: ready exactly when the reply is complete") {
  for (const std::string reply :
       {"+OK\r\n", "-ERR no\r\n", ":-42\r\n", "$5\r\nhello\r\n", "$-1\r\n", "$0\r\n\r\n", "*0\r\n", "*-1\r\n",
        "*3\r\n:1\r\n$1\r\na\r\n*2\r\n+x\r\n_\r\n", "%2\r\n+a\r\n:1\r\n+b\r\n#t\r\n",
        "|1\r\n+key\r\n+attr\r\n:7\r\n",  // an attribute, then the value it annotates
        "*2\r\n|1\r\n+k\r\n+v\r\n:1\r\n:2\r\n", "=8\r\ntxt:text\r\n", ",3.14\r\n",
        "(12345678901234567890\r\n", "~2\r\n:1\r\n:2\r\n", ">2\r\n+message\r\n+x\r\n"}) {
    CAPTURE(reply);
    CHECK(ready_at(reply) == reply.size());
    // And parse_reply agrees: the whole reply, nothing more.
    std::size_t consumed = 0;
    value v;
    std::string error;
    CHECK(parse_reply(reply + "+next\r\n", consumed, v, error) == parse_status::complete);
    CHECK(consumed == reply.size());
  }
}

TEST_CASE("reply_scanner: bytes that are not RESP are handed to the parser at once") {
  CHECK(ready_at("?what\r\n") == 1);                      // unknown type byte
  CHECK(ready_at(":12x\r\n") == 6);                       // not a number, seen with its CRLF
  CHECK(ready_at("*1\r\n#maybe\r\n") == 12);              // a boolean that is neither t nor f
  CHECK(ready_at(":" + std::string(40, '1')) == 1 + 32);  // a number line too long to be one
  CHECK(ready_at("$3\r\nabcXY") == 9);                    // a bulk string not followed by CRLF
  CHECK(ready_at("*2\r\n=3\r\nabc\r\n:1\r\n") == 13);     // a verbatim string without its format
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "*1\r\n";
  CHECK(ready_at(deep) <= 65 * 4);  // nesting past the decoder's limit
}

TEST_CASE("reply_scanner: resumes where it stopped, scanning each byte once") {
  reply_scanner s;
  const std::string reply = "*3\r\n$3\r\nfoo\r\n:12\r\n+bar\r\n";
  CHECK_FALSE(s.ready(std::string_view(reply).substr(0, 10)));
  CHECK_FALSE(s.ready(std::string_view(reply).substr(0, 16)));
  CHECK(s.ready(reply));
  s.reset();
  CHECK(s.ready("+OK\r\n"));
}

TEST_CASE("pipeline: a 100,000-element reply in 256-byte reads is decoded once, in linear time") {
  pipeline p;
  auto r = std::make_shared<pending_request>();
  r->payload = "*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n";
  r->expected_replies = 1;
  std::size_t elements = 0;
  r->done = [&elements](boost::system::error_code ec, std::vector<value>&& replies) {
    CHECK_FALSE(ec);
    REQUIRE(replies.size() == 1);
    elements = replies[0].elements.size();
  };
  p.enqueue(r);
  (void)p.prepare_write(0);
  std::string reply = "*100000\r\n";
  for (int i = 0; i < 100000; ++i) reply += "$9\r\nkey:" + std::to_string(10000 + i % 10000) + "\r\n";
  const auto start = std::chrono::steady_clock::now();
  std::string buffer;
  for (std::size_t at = 0; at < reply.size(); at += 256) {
    buffer.append(reply, at, 256);
    boost::system::error_code ec;
    buffer.erase(0, p.on_read(buffer, ec));
    REQUIRE_FALSE(ec);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(elements == 100000);
  CHECK(buffer.empty());
  // Decoding from the start on every read took ~5 s (5,700 reads of a reply growing to 1.5 MB).
  CHECK(took < std::chrono::seconds(1));
}

TEST_CASE("reply_scanner: a long line arriving in small pieces is searched once") {
  reply_scanner s;
  const std::string reply = "+" + std::string(1 << 20, 'x') + "\r\n";
  const auto start = std::chrono::steady_clock::now();
  std::size_t n = 0;
  for (; n < reply.size(); n = std::min(reply.size(), n + 64))
    CHECK_FALSE(s.ready(std::string_view(reply).substr(0, n)));
  CHECK(s.ready(reply));
  // From the line's start on every call: 16,000 searches of up to 1 MB.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}
