#pragma once
// `sluice counters get|reset|set`: the counters API (docs/guides/operate.md#counters-look-at-reset-set) from
// a shell. Prints the answer's JSON and exits 0, or prints what went wrong and exits 2.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ratelimit/client/flag_parser.hpp"

namespace sluice::ratelimit::client {

struct counters_options {
  std::string action;  // get, reset or set
  std::string debug_addr = "localhost:6070";
  std::string domain;
  std::vector<std::pair<std::string, std::string>> entries;
  bool by_entry = false;  // -entry flags: sent as entry= parameters, each escaped whole
  std::string token_file;
  std::optional<std::uint64_t> used;
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
};

std::variant<counters_options, help_requested, std::string> parse_counters_flags(
    std::span<const std::string_view> args);

// The request target for these options, escaped: "/counters?domain=...&descriptor=...[&used=N]", or with
// -entry flags "...&entry=...&entry=...".
std::string counters_target(const counters_options& o);

int run_counters(std::span<const std::string_view> args);

}  // namespace sluice::ratelimit::client
