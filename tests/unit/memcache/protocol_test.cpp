#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "memcache/protocol.hpp"

using namespace sluice::memcache;

namespace {

struct parsed {
  parse_status status;
  std::size_t consumed = 0;
  reply out;
  std::string error;
};

parsed parse(std::string_view data, reply_kind kind) {
  parsed p;
  p.status = parse_reply(data, kind, p.consumed, p.out, p.error);
  return p;
}

}  // namespace

TEST_CASE("keys memcached refuses are named before anything is sent") {
  CHECK_FALSE(key_problem("domain_key_value_1234"));
  CHECK_FALSE(key_problem(std::string(250, 'k')));
  CHECK(*key_problem(std::string(251, 'k')) == "the key is 251 bytes long (memcached takes at most 250)");
  CHECK(*key_problem("") == "the key is empty");
  for (const std::string& bad :
       std::vector<std::string>{"a b", "a\r\nb", std::string("a\0b", 3), "a\x7f", "a\tb"}) {
    CHECK(*key_problem(bad) == "the key holds a space or a control character, which memcached refuses");
  }
  CHECK_FALSE(key_problem("unicode_\xc3\xa9"));  // bytes above 0x7f are fine, as for gomemcache
}

TEST_CASE(
    "exptime: relative up to 30 days, absolute beyond (upstream's MONTH and YEAR keys expired at once)") {
  CHECK(exptime_for(60, 1'700'000'000) == 60);
  CHECK(exptime_for(2'592'000, 1'700'000'000) == 2'592'000);
  CHECK(exptime_for(2'592'001, 1'700'000'000) == 1'702'592'001u);
  CHECK(exptime_for(31'536'000 + 300, 1'700'000'000) == 1'731'536'300u);
  CHECK(exptime_for(4'000'000'000u, 1'700'000'000) == UINT32_MAX);
}

TEST_CASE("commands are encoded as memcached reads them") {
  std::string out;
  std::string keys;
  add_get_key(keys, "a_1");
  add_get_key(keys, "b_2");
  encode_get(out, keys);
  encode_incr(out, "a_1", 18446744073709551615ull);
  encode_add(out, "a_1", "3", 2'592'000);
  encode_decr(out, "b_2", 7);
  CHECK(out == "get a_1 b_2\r\nincr a_1 18446744073709551615\r\nadd a_1 0 2592000 1\r\n3\r\ndecr b_2 7\r\n");
}

TEST_CASE("get: values, none, the CAS field, partial input") {
  const std::string full = "VALUE a_1 0 2\r\n12\r\nVALUE b_2 5 0\r\n\r\nEND\r\nnext";
  auto p = parse(full, reply_kind::values);
  REQUIRE(p.status == parse_status::complete);
  CHECK(p.consumed == full.size() - 4);
  REQUIRE(p.out.items.size() == 2);
  CHECK(p.out.items[0].key == "a_1");
  CHECK(p.out.items[0].data == "12");
  CHECK(p.out.items[1].flags == 5);
  CHECK(p.out.items[1].data.empty());
  for (std::size_t n = 0; n < full.size() - 4; ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK(parse(full.substr(0, n), reply_kind::values).status == parse_status::need_more);
  }
  CHECK(parse("END\r\n", reply_kind::values).out.items.empty());
  CHECK(parse("VALUE k 0 1 99\r\n7\r\nEND\r\n", reply_kind::values).out.items.at(0).data == "7");
  // Data may hold CRLF: the length decides.
  CHECK(parse("VALUE k 0 4\r\n\r\n\r\n\r\nEND\r\n", reply_kind::values).out.items.at(0).data == "\r\n\r\n");
}

TEST_CASE("incr and add replies") {
  auto n = parse("42\r\n", reply_kind::incr);
  CHECK(n.out.result == reply::status::number);
  CHECK(n.out.number == 42);
  CHECK(n.consumed == 4);
  CHECK(parse("18446744073709551615\r\n", reply_kind::incr).out.number == UINT64_MAX);
  CHECK(parse("9  \r\n", reply_kind::incr).out.number == 9);
  CHECK(parse("NOT_FOUND\r\n", reply_kind::incr).out.result == reply::status::not_found);
  CHECK(parse("STORED\r\n", reply_kind::store).out.result == reply::status::stored);
  CHECK(parse("NOT_STORED\r\n", reply_kind::store).out.result == reply::status::not_stored);
  CHECK(parse("STORED", reply_kind::store).status == parse_status::need_more);
}

TEST_CASE("the operator's set and delete") {
  std::string out;
  encode_set(out, "a_1", "17", 3600);
  encode_delete(out, "a_0");
  CHECK(out == "set a_1 0 3600 2\r\n17\r\ndelete a_0\r\n");
  CHECK(parse("STORED\r\n", reply_kind::store).out.result == reply::status::stored);
  CHECK(parse("DELETED\r\n", reply_kind::erase).out.result == reply::status::deleted);
  CHECK(parse("NOT_FOUND\r\n", reply_kind::erase).out.result == reply::status::not_found);
  CHECK(parse("STORED\r\n", reply_kind::erase).status == parse_status::protocol_error);
  CHECK(parse("DELETED", reply_kind::erase).status == parse_status::need_more);
}

TEST_CASE("error replies are values, for every command") {
  for (auto kind : {reply_kind::values, reply_kind::incr, reply_kind::store, reply_kind::erase}) {
    CHECK(parse("ERROR\r\n", kind).out.result == reply::status::error);
    auto c = parse("CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", kind);
    CHECK(c.out.result == reply::status::client_error);
    CHECK(c.out.message == "cannot increment or decrement non-numeric value");
    auto s = parse("SERVER_ERROR out of memory\r\n", kind);
    CHECK(s.out.result == reply::status::server_error);
    CHECK(s.out.message == "out of memory");
  }
}

TEST_CASE("malformed replies are protocol errors with a reason") {
  CHECK(parse("VALUE k x 1\r\n1\r\nEND\r\n", reply_kind::values).error ==
        "memcached sent a malformed VALUE line");
  CHECK(parse("VALUE k 0 1 2 3\r\n1\r\nEND\r\n", reply_kind::values).error ==
        "memcached sent a malformed VALUE line");
  CHECK(parse("VALUE k 0 2\r\n123\r\nEND\r\n", reply_kind::values).error ==
        "memcached sent a value without its end");
  CHECK(parse("VALUE k 0 1048577\r\n", reply_kind::values).error == "memcached sent a value over 1 MiB");
  CHECK(parse("STORED\r\n", reply_kind::values).error == "memcached sent an unexpected line to get");
  CHECK(parse("VALUE k 0 1\r\n1\r\nERROR\r\n", reply_kind::values).status == parse_status::protocol_error);
  CHECK(parse("-1\r\n", reply_kind::incr).error == "memcached sent an unexpected reply to incr");
  CHECK(parse("EXISTS\r\n", reply_kind::store).error == "memcached sent an unexpected reply to add or set");
  CHECK(parse(std::string(600, 'x'), reply_kind::incr).error == "memcached sent a line without an end");
  CHECK(parse(std::string(100, 'x'), reply_kind::incr).status == parse_status::need_more);
}

// Found by fuzz_memcache_protocol: 512 bytes and a CR were "a line without an end".
TEST_CASE("a line of the longest length waits for its CRLF however the reads cut it") {
  const std::string line = "CLIENT_ERROR " + std::string(limits::max_line_length - 13, 'x');
  REQUIRE(line.size() == limits::max_line_length);
  const auto whole = parse(line + "\r\n", reply_kind::incr);
  CHECK(whole.status == parse_status::complete);
  CHECK(whole.consumed == line.size() + 2);
  CHECK(parse(line, reply_kind::incr).status == parse_status::need_more);
  CHECK(parse(line + "\r", reply_kind::incr).status == parse_status::need_more);
  CHECK(parse(line + "x", reply_kind::incr).error == "memcached sent a line without an end");
  CHECK(parse(line + "\r", reply_kind::values).status == parse_status::need_more);
  CHECK(parse(line + "xx", reply_kind::values).error == "memcached sent a line without an end");
}
