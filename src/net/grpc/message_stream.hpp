#pragma once
// The request messages of a client-streaming (bidirectional) call: gRPC's length-prefixed framing over DATA
// chunks split anywhere. Each message is handed on as soon as it is whole (gzip inflated when flagged), so a
// stream that lives for hours holds at most one unfinished message. The receive limit applies to each
// message, checked as soon as its length is known.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "net/grpc/message_reader.hpp"

namespace sluice::net::grpc {

class message_stream {
 public:
  message_stream(std::size_t max_bytes, encoding enc) : max_bytes_(max_bytes), encoding_(enc) {}

  // Feeds a chunk; `deliver` hears each message completed by it, in order (the view is valid during the
  // call). After an error the stream is unusable: the call ends with it.
  std::optional<call_error> feed(std::span<const std::uint8_t> chunk,
                                 const std::function<void(std::string_view)>& deliver);
  // At the client's half-close: an error if it cut a message short.
  std::optional<call_error> finish() const;

 private:
  std::optional<call_error> take(std::string_view framed,
                                 const std::function<void(std::string_view)>& deliver);

  std::size_t max_bytes_;
  encoding encoding_;
  std::string partial_;   // the prefix and body of a message not yet whole
  std::string inflated_;  // reused for gzip-compressed messages
};

}  // namespace sluice::net::grpc
