// libFuzzer: arbitrary bytes as the body of POST /json (the proto3 JSON mapping of RateLimitRequest). Checks:
// no crash, no leak, no exception (the reader reports errors as values); an error is never empty; a request
// that parses prints (protobuf's own JSON printer) to JSON that parses back to the same message; and the
// integer reader agrees with itself: an accepted number written as a plain decimal reads back the same.
//
// Build and run: scripts/fuzz json_request [seconds]

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "ratelimit/api/json_codec.hpp"
#include "ratelimit/api/json_number.hpp"

namespace {

namespace api = sluice::ratelimit::api;

void check(bool ok) {
  if (!ok) std::abort();
}

void round_trip(std::string_view body) {
  api::rls_request request;
  const auto error = api::parse_request_json(body, request);
  if (error) {
    check(!error->empty());
    return;
  }
  std::string printed;
  check(google::protobuf::util::MessageToJsonString(request, &printed).ok());
  api::rls_request again;
  check(!api::parse_request_json(printed, again));
  check(google::protobuf::util::MessageDifferencer::Equals(request, again));
}

// The input as one number (or a quoted number's content).
void numbers(std::string_view text) {
  constexpr auto max64 = std::numeric_limits<std::uint64_t>::max();
  if (const auto v = api::detail::to_unsigned(text, max64)) {
    check(api::detail::to_unsigned(std::to_string(*v), max64) == v);
    check(api::detail::to_unsigned(text, *v) == v);
    if (*v > 0) check(!api::detail::to_unsigned(text, *v - 1));
  }
  if (const auto v = api::detail::to_int32(text)) check(api::detail::to_int32(std::to_string(*v)) == v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  round_trip(bytes);
  if (size <= 64) numbers(bytes);
  return 0;
}
