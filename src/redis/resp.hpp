#pragma once
// RESP (REdis Serialization Protocol) without I/O: encoding commands and decoding replies from bytes. Replies
// of RESP2 and the RESP3 types a RESP2 server can send are supported. A Redis `-ERR` reply is a value, not an
// error.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::redis {

// What the decoder accepts; past these a reply is a protocol error.
namespace resp_limits {
inline constexpr std::size_t max_depth = 64;  // nested aggregates
// Redis' own default proto-max-bulk-len: a larger length is a corrupt stream, not a reply worth buffering.
inline constexpr std::int64_t max_bulk_length = 512LL * 1024 * 1024;
// Longer than any int64 in decimal: a number line without CRLF within this many bytes is malformed, so a
// garbage stream fails at once instead of being buffered while we wait for a CRLF.
inline constexpr std::size_t max_number_length = 32;
}  // namespace resp_limits

struct value {
  enum class kind : std::uint8_t { simple_string, error, integer, bulk_string, array, null };
  kind type = kind::null;
  std::string text;  // simple_string, error, bulk_string
  std::int64_t integer = 0;
  std::vector<value> elements;  // array

  bool is_error() const { return type == kind::error; }
};

enum class parse_status { complete, need_more, protocol_error };

// Decodes one complete reply from the front of `data`. On complete, `consumed` is its length in bytes and
// `out` holds it; on need_more nothing is consumed (call again with more bytes); on protocol_error,
// `error_message` says what was wrong. Bulk strings are checked against their declared length before they are
// scanned, so an incomplete large reply costs O(1) per call.
parse_status parse_reply(std::string_view data, std::size_t& consumed, value& out,
                         std::string& error_message);

// A batch of commands, encoded as RESP arrays of bulk strings, with the number of replies it expects.
class request {
 public:
  // Appends one command, e.g. push({"INCRBY", key, "1"}).
  void push(std::initializer_list<std::string_view> args);
  void push(std::span<const std::string_view> args);
  // AUTH <password> or AUTH <username> <password>; nothing without a password.
  void push_auth(std::string_view username, std::string_view password);
  // Room for `bytes` of commands in one allocation (a decision's commands otherwise grow it several times).
  void reserve(std::size_t bytes) { payload_.reserve(bytes); }
  const std::string& payload() const { return payload_; }
  // Moves the encoded bytes out (into a pending_request) and empties the request.
  std::string release_payload() {
    commands_ = 0;
    return std::move(payload_);
  }
  std::size_t expected_replies() const { return commands_; }
  void clear() {
    payload_.clear();
    commands_ = 0;
  }

 private:
  std::string payload_;
  std::size_t commands_ = 0;
};

}  // namespace sluice::redis
