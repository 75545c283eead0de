#pragma once
// The grpc-timeout request header: 1 to 8 ASCII digits and a unit (H, M, S, m, u, n), e.g. Envoy's "20m".

#include <chrono>
#include <optional>
#include <string_view>

namespace sluice::net::grpc {

// Null for anything else: the caller refuses the call (INTERNAL), as grpc-go does.
std::optional<std::chrono::nanoseconds> parse_timeout(std::string_view text);

}  // namespace sluice::net::grpc
