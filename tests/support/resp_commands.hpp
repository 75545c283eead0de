#pragma once
// What the test Redis servers (fake_redis.hpp, tests/sim/virtual_redis.hpp) read from a request and write
// back: a pipeline's commands, their integer arguments, and integer replies.

#include <charconv>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis/resp.hpp"

namespace sluice::test {

using command_list = std::vector<std::vector<std::string>>;

// The commands of a pipeline as Sluice encodes them (arrays of bulk strings); throws on anything else.
inline command_list commands_of(const std::string& payload) {
  command_list out;
  std::size_t at = 0;
  auto number = [&](char prefix) {
    if (payload[at] != prefix) throw std::runtime_error("bad RESP");
    const auto end = payload.find("\r\n", at);
    std::size_t n = 0;
    std::from_chars(payload.data() + at + 1, payload.data() + end, n);
    at = end + 2;
    return n;
  };
  while (at < payload.size()) {
    auto& command = out.emplace_back();
    for (std::size_t args = number('*'); args > 0; --args) {
      const std::size_t len = number('$');
      command.push_back(payload.substr(at, len));
      at += len + 2;
    }
  }
  return out;
}

inline std::int64_t to_int(const std::string& s) {
  std::int64_t n = 0;
  std::from_chars(s.data(), s.data() + s.size(), n);
  return n;
}

inline redis::value integer(std::int64_t n) {
  redis::value v;
  v.type = redis::value::kind::integer;
  v.integer = n;
  return v;
}

}  // namespace sluice::test
