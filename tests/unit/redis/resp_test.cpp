#include <doctest/doctest.h>

#include <string>
#include <string_view>
#include <vector>

#include "redis/resp.hpp"

using namespace sluice::redis;
using namespace std::string_literals;
using namespace std::string_view_literals;

namespace {

// A canonical text of a value, so that a failed CHECK shows what was parsed.
std::string describe(const value& v) {
  switch (v.type) {
    case value::kind::simple_string:
      return "+" + v.text;
    case value::kind::error:
      return "-" + v.text;
    case value::kind::integer:
      return ":" + std::to_string(v.integer);
    case value::kind::bulk_string:
      return "$" + v.text;
    case value::kind::null:
      return "null";
    case value::kind::array: {
      std::string out = "[";
      for (const value& e : v.elements) out += (out.size() > 1 ? ", " : "") + describe(e);
      return out + "]";
    }
  }
  return "?";
}

// Parses exactly one reply that must span all of `bytes`.
std::string parse_one(std::string_view bytes) {
  std::size_t consumed = 0;
  value v;
  std::string error;
  const parse_status status = parse_reply(bytes, consumed, v, error);
  REQUIRE_MESSAGE(status == parse_status::complete, error);
  CHECK(consumed == bytes.size());
  return describe(v);
}

// The protocol error message for `bytes`, checking that nothing was consumed.
std::string parse_error(std::string_view bytes) {
  std::size_t consumed = 99;
  value v;
  std::string error;
  CHECK(parse_reply(bytes, consumed, v, error) == parse_status::protocol_error);
  CHECK(consumed == 0);
  return error;
}

// Parses every complete reply at the front of `buffer` and erases them, as a reader loop would.
void drain(std::string& buffer, std::vector<std::string>& out) {
  for (;;) {
    std::size_t consumed = 0;
    value v;
    std::string error;
    const parse_status status = parse_reply(buffer, consumed, v, error);
    REQUIRE_MESSAGE(status != parse_status::protocol_error, error);
    if (status == parse_status::need_more) {
      CHECK(consumed == 0);
      return;
    }
    out.push_back(describe(v));
    buffer.erase(0, consumed);
  }
}

}  // namespace

TEST_CASE("resp: RESP2 types") {
  CHECK(parse_one("+OK\r\n") == "+OK");
  CHECK(parse_one("+\r\n") == "+");
  CHECK(parse_one("+" + std::string(5000, 's') + "\r\n") == "+" + std::string(5000, 's'));
  CHECK(parse_one("-ERR wrong number of arguments\r\n") == "-ERR wrong number of arguments");
  CHECK(parse_one(":0\r\n") == ":0");
  CHECK(parse_one(":-42\r\n") == ":-42");
  CHECK(parse_one(":9223372036854775807\r\n") == ":9223372036854775807");
  CHECK(parse_one(":-9223372036854775808\r\n") == ":-9223372036854775808");
  CHECK(parse_one("$5\r\nhello\r\n") == "$hello");
  CHECK(parse_one("$0\r\n\r\n") == "$");
  CHECK(parse_one("$-1\r\n") == "null");
  CHECK(parse_one("*-1\r\n") == "null");
  CHECK(parse_one("*0\r\n") == "[]");
  CHECK(parse_one("*3\r\n$3\r\nfoo\r\n:1\r\n$-1\r\n") == "[$foo, :1, null]");
}

TEST_CASE("resp: a Redis error reply is a value, also inside an array") {
  std::size_t consumed = 0;
  value v;
  std::string error;
  REQUIRE(parse_reply("-WRONGTYPE Operation against a key\r\n", consumed, v, error) ==
          parse_status::complete);
  CHECK(v.is_error());
  CHECK(v.text == "WRONGTYPE Operation against a key");
  CHECK(error.empty());
  // EXEC of a transaction where one command failed.
  CHECK(parse_one("*3\r\n:1\r\n-ERR value is not an integer\r\n+OK\r\n") ==
        "[:1, -ERR value is not an integer, +OK]");
}

TEST_CASE("resp: RESP3 types map onto the RESP2 kinds") {
  CHECK(parse_one("_\r\n") == "null");
  CHECK(parse_one("#t\r\n") == ":1");
  CHECK(parse_one("#f\r\n") == ":0");
  CHECK(parse_one(",3.14\r\n") == "+3.14");
  CHECK(parse_one(",-inf\r\n") == "+-inf");
  CHECK(parse_one("(3492890328409238509324850943850943825024385\r\n") ==
        "+3492890328409238509324850943850943825024385");
  CHECK(parse_one("=15\r\ntxt:Some string\r\n") == "$Some string");
  CHECK(parse_one("=4\r\nmkd:\r\n") == "$");
  CHECK(parse_one("!21\r\nSYNTAX invalid syntax\r\n") == "-SYNTAX invalid syntax");
  CHECK(parse_one("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n") == "[+first, :1, +second, :2]");
  CHECK(parse_one("%0\r\n") == "[]");
  CHECK(parse_one("~3\r\n+a\r\n+b\r\n#t\r\n") == "[+a, +b, :1]");
  CHECK(parse_one(">3\r\n+message\r\n+chan\r\n$2\r\nhi\r\n") == "[+message, +chan, $hi]");
}

TEST_CASE("resp: attributes are skipped, at the top and inside aggregates") {
  CHECK(parse_one("|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.19\r\n$1\r\nb\r\n,0.23\r\n"
                  "*2\r\n:2039123\r\n:9543892\r\n") == "[:2039123, :9543892]");
  CHECK(parse_one("*2\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\nx\r\n:2\r\n") == "[$x, :2]");
  CHECK(parse_one("|0\r\n|1\r\n+a\r\n+b\r\n+OK\r\n") == "+OK");
  // A long run of attributes is a loop, not a recursion that could exhaust the stack.
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "|0\r\n";
  CHECK(parse_one(many + ":7\r\n") == ":7");
}

TEST_CASE("resp: nested arrays") {
  CHECK(parse_one("*2\r\n*2\r\n:1\r\n:2\r\n*2\r\n*0\r\n*1\r\n*-1\r\n") == "[[:1, :2], [[], [null]]]");
  CHECK(parse_one("*2\r\n*1\r\n$-1\r\n-ERR inner\r\n") == "[[null], -ERR inner]");
}

TEST_CASE("resp: only the first reply is consumed") {
  std::size_t consumed = 0;
  value v;
  std::string error;
  REQUIRE(parse_reply("+OK\r\n:1\r\n", consumed, v, error) == parse_status::complete);
  CHECK(consumed == 5);
  CHECK(describe(v) == "+OK");
  CHECK(parse_reply("", consumed, v, error) == parse_status::need_more);
  CHECK(consumed == 0);
}

TEST_CASE("resp: split at every byte position, the same replies come out") {
  const std::vector<std::string> replies = {
      "+OK\r\n",
      "-ERR no such key\r\n",
      ":-12345\r\n",
      "$12\r\nhello\r\nworld\r\n",
      "$0\r\n\r\n",
      "$-1\r\n",
      "*-1\r\n",
      "*3\r\n*2\r\n:1\r\n$1\r\nx\r\n-ERR in array\r\n*0\r\n",
      "_\r\n",
      "#t\r\n",
      ",1.5\r\n",
      "(12345678901234567890\r\n",
      "=7\r\ntxt:abc\r\n",
      "%1\r\n+k\r\n*1\r\n:9\r\n",
      "~1\r\n+m\r\n",
      ">2\r\n+push\r\n:1\r\n",
      "|1\r\n+a\r\n:1\r\n+after attribute\r\n",
      "!3\r\nERR\r\n",
  };
  std::string stream;
  std::vector<std::string> expected;
  for (const std::string& reply : replies) {
    expected.push_back(parse_one(reply));
    stream += reply;
    // Every strict prefix of one reply is incomplete, never an error, and consumes nothing.
    for (std::size_t n = 0; n < reply.size(); ++n) {
      std::size_t consumed = 99;
      value v;
      std::string error;
      CHECK_MESSAGE(
          parse_reply(std::string_view(reply).substr(0, n), consumed, v, error) == parse_status::need_more,
          reply.substr(0, n));
      CHECK(consumed == 0);
    }
  }
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    CAPTURE(split);
    std::string buffer = stream.substr(0, split);
    std::vector<std::string> got;
    drain(buffer, got);
    buffer += stream.substr(split);
    drain(buffer, got);
    CHECK(buffer.empty());
    CHECK(got == expected);
  }
}

TEST_CASE("resp: a 1 MiB bulk string, binary-safe") {
  std::string payload(1 << 20, 'a');
  for (std::size_t i = 0; i < payload.size(); i += 1000) payload.replace(i, 3, "\r\n\0"sv);
  const std::string bytes = "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
  std::size_t consumed = 0;
  value v;
  std::string error;
  REQUIRE(parse_reply(bytes, consumed, v, error) == parse_status::complete);
  CHECK(consumed == bytes.size());
  CHECK(v.type == value::kind::bulk_string);
  CHECK(v.text == payload);
  CHECK(parse_reply(std::string_view(bytes).substr(0, bytes.size() - 1), consumed, v, error) ==
        parse_status::need_more);
  CHECK(parse_reply(std::string_view(bytes).substr(0, bytes.size() - 3), consumed, v, error) ==
        parse_status::need_more);
}

TEST_CASE("resp: bulk strings up to 512 MB are accepted, larger ones are not") {
  std::size_t consumed = 0;
  value v;
  std::string error;
  CHECK(parse_reply("$536870912\r\n", consumed, v, error) == parse_status::need_more);
  CHECK(parse_reply("$536870912\r\nsome of it", consumed, v, error) == parse_status::need_more);
  CHECK(parse_error("$536870913\r\n") == "RESP bulk string of 536870913 bytes exceeds the 512 MB limit");
}

TEST_CASE("resp: a huge declared element count does not allocate for it") {
  std::size_t consumed = 0;
  value v;
  std::string error;
  CHECK(parse_reply("*1000000000000000\r\n:1\r\n", consumed, v, error) == parse_status::need_more);
  CHECK(parse_reply("%4000000000000000\r\n:1\r\n", consumed, v, error) == parse_status::need_more);
}

TEST_CASE("resp: protocol errors name what was wrong and consume nothing") {
  CHECK(parse_error("x\r\n") == "unknown RESP type byte 'x' (0x78)");
  CHECK(parse_error("\x01") == "unknown RESP type byte 0x01");
  CHECK(parse_error("*2\r\n:1\r\n?\r\n") == "unknown RESP type byte '?' (0x3f)");
  CHECK(parse_error("$abc\r\n") == "invalid RESP length 'abc'");
  CHECK(parse_error("$\r\n") == "invalid RESP length ''");
  CHECK(parse_error("*1x\r\n") == "invalid RESP length '1x'");
  CHECK(parse_error("$-2\r\n") == "invalid RESP length '-2'");
  CHECK(parse_error("*-5\r\n") == "invalid RESP length '-5'");
  CHECK(parse_error("%-3\r\n") == "invalid RESP length '-3'");
  CHECK(parse_error(":12a\r\n") == "invalid RESP integer '12a'");
  CHECK(parse_error(":\x02\r\n") == "invalid RESP integer '\\x02'");
  CHECK(parse_error("$3\r\nfoobar\r\n") == "RESP bulk string of 3 bytes not followed by CRLF");
  CHECK(parse_error("$3\r\nfoo\n\r") == "RESP bulk string of 3 bytes not followed by CRLF");
  CHECK(parse_error(":9223372036854775808\r\n") == "RESP integer overflow '9223372036854775808'");
  CHECK(parse_error(":-9223372036854775809\r\n") == "RESP integer overflow '-9223372036854775809'");
  CHECK(parse_error("$99999999999999999999\r\n") == "RESP integer overflow '99999999999999999999'");
  CHECK(parse_error("%4611686018427387904\r\n") == "RESP integer overflow '4611686018427387904'");
  // A number without CRLF fails once it is longer than any number, rather than waiting for more.
  CHECK(parse_error(":" + std::string(40, '9')) == "RESP integer overflow '" + std::string(32, '9') + "'");
  CHECK(parse_error("$" + std::string(40, 'z')) == "invalid RESP length '" + std::string(32, 'z') + "'");
  CHECK(parse_error("+OK\rX") == "RESP line not terminated by CRLF");
  CHECK(parse_error(":1\rX") == "RESP line not terminated by CRLF");
  CHECK(parse_error("#x\r\n") == "invalid RESP boolean 'x'");
  CHECK(parse_error("#" + std::string(40, 'x') + "\r\n") ==
        "invalid RESP boolean '" + std::string(32, 'x') + "'...");
  CHECK(parse_error("_x\r\n") == "invalid RESP null 'x'");
  CHECK(parse_error("=3\r\ntxt\r\n") == "RESP verbatim string without a format prefix");
}

TEST_CASE("resp: nesting is limited to 64 levels") {
  std::string ok;
  for (int i = 0; i < 64; ++i) ok += "*1\r\n";
  CHECK(parse_one(ok + ":1\r\n") == std::string(64, '[') + ":1" + std::string(64, ']'));
  CHECK(parse_one(ok + "*-1\r\n") == std::string(64, '[') + "null" + std::string(64, ']'));
  CHECK(parse_error(ok + "*1\r\n:1\r\n") == "RESP nesting deeper than 64 levels");
  CHECK(parse_error(ok + "%1\r\n:1\r\n:1\r\n") == "RESP nesting deeper than 64 levels");
  CHECK(parse_error(ok + "|1\r\n:1\r\n:1\r\n:1\r\n") == "RESP nesting deeper than 64 levels");
}

TEST_CASE("request: commands are encoded byte-exact and counted") {
  request r;
  CHECK(r.expected_replies() == 0);
  r.push({"INCRBY", "key", "1"});
  CHECK(r.payload() == "*3\r\n$6\r\nINCRBY\r\n$3\r\nkey\r\n$1\r\n1\r\n");
  CHECK(r.expected_replies() == 1);
  const std::vector<std::string_view> args = {"EXPIRE", "key", "60"};
  r.push(args);
  CHECK(r.payload() ==
        "*3\r\n$6\r\nINCRBY\r\n$3\r\nkey\r\n$1\r\n1\r\n*3\r\n$6\r\nEXPIRE\r\n$3\r\nkey\r\n$2\r\n60\r\n");
  CHECK(r.expected_replies() == 2);
  r.clear();
  CHECK(r.payload().empty());
  CHECK(r.expected_replies() == 0);
}

TEST_CASE("request: an empty command is not encoded, since Redis would never answer it") {
  request r;
  r.push({});
  CHECK(r.payload().empty());
  CHECK(r.expected_replies() == 0);
}

TEST_CASE("request: binary arguments, and a round trip through the parser") {
  const std::string binary = "a\r\nb\0c\r\n"s;
  request r;
  r.push({"SET", binary, ""});
  CHECK(r.payload() == "*3\r\n$3\r\nSET\r\n$8\r\na\r\nb\0c\r\n\r\n$0\r\n\r\n"s);
  const std::string long_arg(100000, 'k');
  r.push({"GET", long_arg});
  std::string buffer = r.payload();
  std::vector<std::string> got;
  drain(buffer, got);
  CHECK(buffer.empty());
  CHECK(got == std::vector<std::string>{"[$SET, $" + binary + ", $]", "[$GET, $" + long_arg + "]"});
}
