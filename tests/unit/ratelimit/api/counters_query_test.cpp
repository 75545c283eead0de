// The counters API's query parser, ADMIN_TOKEN_FILE's tokens and the Bearer header, and the debug listener's
// Host check.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cstdio>
#include <string>
#include <variant>

#include "net/http/host_check.hpp"
#include "ratelimit/api/admin_tokens.hpp"
#include "ratelimit/api/counters_query.hpp"

using namespace sluice;
using namespace sluice::ratelimit::api;

namespace {

counters_query ok(std::string_view target) {
  auto r = parse_counters_query(target);
  if (auto* e = std::get_if<std::string>(&r)) FAIL(*e);
  return std::get<counters_query>(r);
}

std::string error(std::string_view target) {
  auto r = parse_counters_query(target);
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

}  // namespace

TEST_CASE("counters query: domain, descriptor, used; escapes decoded after splitting") {
  auto q = ok("/counters?domain=ops&descriptor=user=u1,plan=gold");
  CHECK(q.domain == "ops");
  REQUIRE(q.entries.size() == 2);
  CHECK(q.entries[0] == std::pair<std::string, std::string>("user", "u1"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("plan", "gold"));
  CHECK_FALSE(q.used);
  q = ok("/counters?descriptor=k%2C1=a%3Db%2Cc,e=&domain=my%20domain&used=7");
  CHECK(q.domain == "my domain");
  CHECK(q.entries[0] == std::pair<std::string, std::string>("k,1", "a=b,c"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("e", ""));
  CHECK(*q.used == 7);
  CHECK(descriptor_text(q.entries) == "k,1=a=b,c,e=");
  CHECK(ok("/counters?domain=d&&descriptor=k=v&").entries.size() == 1);
}

TEST_CASE("counters query: a descriptor escaped whole, as client libraries send it, is decoded first") {
  // Python: urlencode({'domain': 'ops', 'descriptor': 'customer=acme'})
  auto q = ok("/counters?domain=ops&descriptor=customer%3Dacme");
  REQUIRE(q.entries.size() == 1);
  CHECK(q.entries[0] == std::pair<std::string, std::string>("customer", "acme"));
  // ',' separates entries once decoded; '+' is a space and %2B a plus sign; each entry splits at its first
  // '='.
  q = ok("/counters?domain=my+ops&descriptor=customer%3Dacme%2Cplan%3Dgold+tier%2B%2Cmath%3D1%3D1");
  CHECK(q.domain == "my ops");
  REQUIRE(q.entries.size() == 3);
  CHECK(q.entries[0] == std::pair<std::string, std::string>("customer", "acme"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("plan", "gold tier+"));
  CHECK(q.entries[2] == std::pair<std::string, std::string>("math", "1=1"));
  // The documented form (docs/guides/operate.md#counters-look-at-reset-set; a raw '=') is split first, and
  // its '+' stays a plus sign, as before.
  q = ok("/counters?domain=ops&descriptor=k=a+b,k2=c%2Cd%3De");
  CHECK(q.entries[0] == std::pair<std::string, std::string>("k", "a+b"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("k2", "c,d=e"));
}

TEST_CASE("counters query: repeated entry parameters, each decoded whole and split at its first '='") {
  // Python: urlencode([('domain', 'ops'), ('entry', 'user=alice smith'), ('entry', 'tag=a,b'), ('entry',
  // 'k==')])
  auto q = ok("/counters?domain=ops&entry=user%3Dalice+smith&entry=tag%3Da%2Cb&entry=k%3D%3D&used=3");
  REQUIRE(q.entries.size() == 3);
  CHECK(q.entries[0] == std::pair<std::string, std::string>("user", "alice smith"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("tag", "a,b"));
  CHECK(q.entries[2] == std::pair<std::string, std::string>("k", "="));
  CHECK(*q.used == 3);
  // A raw '=' or ',' is taken as it is; an empty value is a value.
  q = ok("/counters?entry=k=v,w&entry=e%3D&domain=ops");
  REQUIRE(q.entries.size() == 2);
  CHECK(q.entries[0] == std::pair<std::string, std::string>("k", "v,w"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("e", ""));
  // Go's url.Values.Encode: keys sorted, '+' for a space, %2B for a plus.
  q = ok("/counters?domain=ops&entry=plan%3Da%2Bb&entry=user%3Dx+y");
  CHECK(q.entries[0] == std::pair<std::string, std::string>("plan", "a+b"));
  CHECK(q.entries[1] == std::pair<std::string, std::string>("user", "x y"));
}

TEST_CASE("counters query: descriptor and entry together, and bad entries, say what is wrong") {
  const auto both = error("/counters?domain=d&descriptor=k=v&entry=k2%3Dv2");
  CHECK(both.find("descriptor and entry cannot be combined") != std::string::npos);
  CHECK(error("/counters?domain=d&entry=k2%3Dv2&descriptor=k%3Dv") == both);
  CHECK(error("/counters?domain=d&entry=k").find("entry 1 'k' has no '='") != std::string::npos);
  CHECK(error("/counters?domain=d&entry=k=v&entry=").find("entry 2 '' has no '='") != std::string::npos);
  CHECK(error("/counters?domain=d&entry=%3Dv").find("entry 1 has an empty key") != std::string::npos);
  CHECK(error("/counters?domain=d&entry=k%3Dv%zz").find("entry 1 has a malformed %-escape") !=
        std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=customer").find("entry 1 'customer' has no '='") !=
        std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k%3Dv%2Cw").find("entry 2 'w' has no '='") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=%3Dv").find("empty key") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k%3Dv%zz").find("malformed") != std::string::npos);
  std::string many = "/counters?domain=d";
  for (int i = 0; i < 65; ++i) many += "&entry=k%3Dv";
  CHECK(error(many).find("more than 64 entry parameters") != std::string::npos);
  CHECK(error("/counters?domain=d").find("or entry=k=v") != std::string::npos);
}

TEST_CASE("counters query: every bad query says what is wrong") {
  CHECK(error("/counters").find("needs domain and descriptor") != std::string::npos);
  CHECK(error("/counters?descriptor=k=v").find("needs domain") != std::string::npos);
  CHECK(error("/counters?domain=d").find("needs descriptor") != std::string::npos);
  CHECK(error("/counters?domain=&descriptor=k=v").find("domain must not be empty") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=").find("descriptor must not be empty") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k").find("entry 1 'k' has no '='") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k=v,x").find("entry 2") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor==v").find("empty key") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k%zz=v").find("malformed") != std::string::npos);
  CHECK(error("/counters?domain=d&domain=e&descriptor=k=v").find("twice") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k=v&used=-1").find("whole number") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k=v&used=1&used=2").find("twice") != std::string::npos);
  CHECK(error("/counters?domain=d&descriptor=k=v&x=1").find("unknown parameter 'x'") != std::string::npos);
  for (auto name : {"token", "access_token", "Authorization", "TOKEN", "%74oken"}) {
    CAPTURE(name);
    CHECK(
        error(std::string("/counters?domain=d&descriptor=k=v&") + name + "=secret").find("never accepted") !=
        std::string::npos);
  }
  std::string many = "/counters?domain=d&descriptor=k=v";
  for (int i = 0; i < 64; ++i) many += ",k=v";
  CHECK(error(many).find("more than 64 entries") != std::string::npos);
}

TEST_CASE("admin tokens: one per line, comments and blank lines skipped, lines remembered") {
  admin_tokens::parsed p;
  CHECK_FALSE(admin_tokens::parse("# ops\n\n  first-token-0123456789  \r\nsecond-token-0123456789\n", p));
  REQUIRE(p.lines.size() == 2);
  CHECK(p.lines[0] == 3);
  CHECK(p.lines[1] == 4);
  CHECK(*admin_tokens::parse("", p) == "holds no token (one per line)");
  CHECK(*admin_tokens::parse("# only\n", p) == "holds no token (one per line)");
  CHECK(*admin_tokens::parse("ok-token-0123456789\nshort\n", p) ==
        "line 2: a token needs at least 16 characters");
  CHECK(admin_tokens::parse("with space inside it\n", p)->find("line 1: a token is printable ASCII") == 0);
}

TEST_CASE("admin tokens: a file, matched in constant time, re-read on demand") {
  const std::string path = "/tmp/sluice-unit-admin-tokens-" + std::to_string(::getpid());
  {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("# rotation\nold-token-0123456789\nnew-token-0123456789\n", f);
    std::fclose(f);
  }
  admin_tokens tokens(path);
  CHECK(tokens.match("old-token-0123456789") == std::optional<std::size_t>(2));
  CHECK(tokens.match("new-token-0123456789") == std::optional<std::size_t>(3));
  CHECK_FALSE(tokens.match("new-token-012345678"));
  CHECK_FALSE(tokens.match(""));
  std::remove(path.c_str());
  CHECK_THROWS_WITH_AS(admin_tokens{path}, doctest::Contains(path.c_str()), std::runtime_error);
}

TEST_CASE("the Authorization header's bearer token") {
  std::string problem;
  CHECK(bearer_token("Bearer abc", problem) == std::optional<std::string_view>("abc"));
  CHECK(bearer_token("bearer   abc  ", problem) == std::optional<std::string_view>("abc"));
  CHECK_FALSE(bearer_token("", problem));
  CHECK(problem.find("needs Authorization: Bearer") != std::string::npos);
  CHECK_FALSE(bearer_token("Basic abc", problem));
  CHECK(problem == "the Authorization header's scheme must be Bearer");
  CHECK_FALSE(bearer_token("Bearer", problem));
  CHECK_FALSE(bearer_token("Bearer   ", problem));
  CHECK(problem == "the Authorization header holds no token");
}

TEST_CASE("the debug listener's Host check") {
  const net::http::host_check check({"sluice.internal", "Ops.Example"});
  for (auto host : {"", "127.0.0.1", "127.0.0.1:6070", "10.1.2.3", "[::1]", "[::1]:6070", "localhost",
                    "LocalHost:80", "localhost.", "sluice.internal", "SLUICE.internal:6070", "ops.example"}) {
    CAPTURE(host);
    CHECK_FALSE(check.refuse(host));
  }
  for (auto host : {"evil.example", "evil.example:6070", "localhost.evil.example", "127.0.0.1.nip.io",
                    "sluice.internal.evil", "xlocalhost", "[evil]"}) {
    CAPTURE(host);
    REQUIRE(check.refuse(host));
    CHECK(check.refuse(host)->find("DEBUG_ALLOWED_HOSTS") != std::string::npos);
  }
  CHECK_FALSE(net::http::host_check({"*"}).refuse("anything.example"));
}
