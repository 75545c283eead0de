#pragma once
// gRPC status codes (grpc/doc/statuscodes.md) and the percent-encoding of grpc-message.

#include <cstdint>
#include <iterator>
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

// A code's name as gRPC spells it ("RESOURCE_EXHAUSTED"); UNKNOWN past the last. Header-only, for the places
// Sluice is a gRPC C++ client too (their codes have the same numbers).
constexpr std::string_view status_name(int code) {
  constexpr std::string_view names[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < static_cast<int>(std::size(names)) ? names[code] : "UNKNOWN";
}

// grpc-message: printable ASCII except '%' as is, every other byte as %XX (PROTOCOL-HTTP2.md).
std::string percent_encode(std::string_view message);

}  // namespace sluice::net::grpc
