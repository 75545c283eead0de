#pragma once
// The request message of a unary or server-streaming call: gRPC's length-prefixed framing (1 byte compressed
// flag, 4 bytes big-endian length), arriving in DATA chunks of any size. Enforces the receive limit as soon
// as the length is known and decompresses gzip. Exactly one message is expected.

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "net/grpc/status.hpp"

namespace sluice::net::grpc {

struct call_error {
  status_code code;
  std::string message;
};

enum class encoding : std::uint8_t { identity, gzip };

// Every message is framed: 1 byte compressed flag, 4 bytes big-endian length, the message.
constexpr std::size_t message_prefix_bytes = 5;
// The length a message's prefix declares.
inline std::size_t declared_length(const char* prefix) {
  auto b = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(prefix[i])); };
  return b(1) << 24 | b(2) << 16 | b(3) << 8 | b(4);
}

class message_reader {
 public:
  explicit message_reader(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // A chunk of the request body; an error ends the call (later chunks are ignored by the caller).
  std::optional<call_error> feed(std::span<const std::uint8_t> chunk);
  // At the end of the request: the one message, decoded. Valid until the reader is destroyed.
  std::optional<call_error> finish(encoding enc);
  std::string_view message() const { return message_; }
  std::size_t max_bytes() const { return max_bytes_; }

 private:
  std::size_t max_bytes_;
  // Prefix + message as received; a typical request fits inline.
  boost::container::small_vector<char, 192> body_;
  std::string inflated_;
  std::string_view message_;
};

// The message inside one whole framed message (prefix first): the payload itself, or, when the compressed
// flag is set and the call's encoding is gzip, the payload inflated into `inflated`.
std::optional<call_error> unframe(std::string_view framed, encoding enc, std::size_t max_bytes,
                                  std::string& inflated, std::string_view& message);

// RESOURCE_EXHAUSTED for a message of `length` bytes past the receive limit, in grpc-go's words.
call_error message_too_large(std::size_t length, std::size_t max);

// gzip-decompresses `in` into `out`; more than `max_bytes` of output is RESOURCE_EXHAUSTED.
std::optional<call_error> gunzip(std::string_view in, std::size_t max_bytes, std::string& out);

}  // namespace sluice::net::grpc
