// REDIS_AUTH_FILE's secrets: the file's forms, what is refused (never quoting the secret), and reading it
// again when Redis refuses it.
#include <doctest/doctest.h>

#include <unistd.h>
#include <cstdio>
#include <fstream>
#include <string>

#include "redis/credentials.hpp"

using namespace sluice::redis;

TEST_CASE("a secret: password or user:password, whitespace dropped") {
  secret s;
  CHECK_FALSE(parse_secret("hunter2\n", s));
  CHECK(s.username.empty());
  CHECK(s.password == "hunter2");
  CHECK_FALSE(parse_secret("  app:pa:ss  \r\n", s));
  CHECK(s.username == "app");
  CHECK(s.password == "pa:ss");  // split at the first ':', as REDIS_AUTH
  CHECK(*parse_secret("", s) == "holds no password (expected password or user:password)");
  CHECK(*parse_secret(" \n\n", s) == "holds no password (expected password or user:password)");
  CHECK(*parse_secret("app:\n", s) == "holds a user without a password (expected user:password)");
  const auto two = parse_secret("old-secret\nnew-secret\n", s);
  REQUIRE(two);
  CHECK(two->find("secret") == std::string::npos);
  CHECK(*two == "holds more than one line (expected password or user:password)");
}

TEST_CASE("a credential file: read at start, read again when refused") {
  const std::string path = "/tmp/sluice-unit-redis-auth-" + std::to_string(::getpid());
  auto write = [&](const char* text) { std::ofstream(path) << text; };
  write("app:first-secret\n");
  credential_file file(path);
  CHECK(file.current().username == "app");
  CHECK(file.current().password == "first-secret");
  CHECK_FALSE(file.refused());  // unchanged
  write("app:second-secret\n");
  CHECK(file.refused());
  CHECK(file.current().password == "second-secret");
  write("\n");  // refused: the last good secret stays
  CHECK_FALSE(file.refused());
  CHECK(file.current().password == "second-secret");
  std::remove(path.c_str());
  try {
    credential_file missing(path);
    FAIL("a missing file must throw");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find(path) == 0);
  }
}
