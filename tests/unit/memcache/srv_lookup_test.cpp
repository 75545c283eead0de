#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "memcache/srv_lookup.hpp"

using namespace sluice::memcache;

namespace {

void name(std::vector<unsigned char>& out, const std::string& dotted) {
  std::size_t start = 0;
  while (start < dotted.size()) {
    auto dot = dotted.find('.', start);
    if (dot == std::string::npos) dot = dotted.size();
    out.push_back(static_cast<unsigned char>(dot - start));
    out.insert(out.end(), dotted.begin() + static_cast<long>(start), dotted.begin() + static_cast<long>(dot));
    start = dot + 1;
  }
  out.push_back(0);
}

void u16(std::vector<unsigned char>& out, unsigned v) {
  out.push_back(static_cast<unsigned char>(v >> 8));
  out.push_back(static_cast<unsigned char>(v & 0xff));
}

// A DNS answer to an SRV query for _memcache._tcp.example.org with these (target, port) records.
std::vector<unsigned char> answer(const std::vector<std::pair<std::string, unsigned>>& records) {
  std::vector<unsigned char> out;
  for (unsigned v : {0x1234u, 0x8180u, 1u, static_cast<unsigned>(records.size()), 0u, 0u}) u16(out, v);
  name(out, "_memcache._tcp.example.org");
  u16(out, 33);
  u16(out, 1);
  for (const auto& [target, port] : records) {
    out.push_back(0xc0);  // the question's name
    out.push_back(12);
    u16(out, 33);
    u16(out, 1);
    for (unsigned v : {0u, 60u}) u16(out, v);
    std::vector<unsigned char> rdata;
    for (unsigned v : {10u, 5u, port}) u16(rdata, v);
    name(rdata, target);
    u16(out, static_cast<unsigned>(rdata.size()));
    out.insert(out.end(), rdata.begin(), rdata.end());
  }
  return out;
}

}  // namespace

TEST_CASE("SRV answers: targets as upstream lists them, fully qualified and sorted") {
  const auto bytes =
      answer({{"cache-b.example.org", 11211}, {"cache-a.example.org", 11212}, {"cache-a.example.org", 9}});
  auto targets = parse_srv_answer("_memcache._tcp.example.org", bytes);
  REQUIRE(targets.has_value());
  CHECK(*targets == std::vector<std::string>{"cache-a.example.org.:11212", "cache-a.example.org.:9",
                                             "cache-b.example.org.:11211"});
}

TEST_CASE("SRV answers: none, or garbage, is an error naming the record") {
  auto none = parse_srv_answer("_m._tcp.x", answer({}));
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error() == "SRV lookup of _m._tcp.x: no targets");
  const auto bytes = answer({{"a.example", 1}});
  auto cut = parse_srv_answer("_m._tcp.x", std::span(bytes).first(bytes.size() - 3));
  REQUIRE_FALSE(cut.has_value());
  CHECK(cut.error() == "SRV lookup of _m._tcp.x: a malformed answer");
}

TEST_CASE("the DNS server setting: an IPv4 address, with a port or not") {
  CHECK(valid_dns_server("127.0.0.1"));
  CHECK(valid_dns_server("127.0.0.1:5353"));
  CHECK_FALSE(valid_dns_server("localhost:53"));
  CHECK_FALSE(valid_dns_server("127.0.0.1:0"));
  CHECK_FALSE(valid_dns_server("127.0.0.1:70000"));
  CHECK_FALSE(valid_dns_server("::1"));
}
