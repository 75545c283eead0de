#pragma once
// `sluice explain`: POST /explain on the debug listener
// (docs/guides/operate.md#explain-why-was-this-request-limited) for the request that `sluice client`'s flags
// describe, plus -debug_addr. Prints the answer's JSON and exits 0, or 2 on error.

#include <span>
#include <string_view>

namespace sluice::ratelimit::client {

int run_explain(std::span<const std::string_view> args);

}  // namespace sluice::ratelimit::client
