#pragma once
// gRPC status codes (grpc/doc/statuscodes.md) and the percent-encoding of grpc-message.

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::net::grpc {

enum class status_code : std::uint8_t {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
  data_loss = 15,
  unauthenticated = 16,
};

// grpc-message: printable ASCII except '%' as is, every other byte as %XX (PROTOCOL-HTTP2.md).
std::string percent_encode(std::string_view message);

}  // namespace sluice::net::grpc
