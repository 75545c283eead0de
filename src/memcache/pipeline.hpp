#pragma once
// The multiplexer of one memcached connection, without I/O (as redis::pipeline; the queue itself is
// core::request_queue): what is queued while a write is in flight leaves together in the next single write;
// replies are matched to requests in FIFO order, each decoded as the kind of command it answers.

#include <boost/system/error_code.hpp>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/request_queue.hpp"
#include "memcache/protocol.hpp"

namespace sluice::memcache {

// One request: its commands' bytes, the kind of each command in order, and who to tell. `done` is called
// exactly once: with success and one reply per command (CLIENT_ERROR and the like are values), or with an
// error code and no replies.
struct pending_request {
  std::string payload;
  std::vector<reply_kind> expected;
  // Reset to null by a caller that gave up (a request timeout): the replies are still consumed, then dropped.
  std::function<void(boost::system::error_code, std::vector<reply>&&)> done;
  std::vector<reply> replies;  // filled as replies arrive
};

class pipeline : public core::request_queue<pending_request> {
 public:
  // Coalesces every unwritten request (each expects at least one reply) into one buffer and marks them
  // written. The buffer stays valid until the next call.
  std::string_view prepare_write();
  // Feeds received bytes: completes requests whose replies are all in. Returns the number of bytes consumed
  // (the caller keeps the rest). On a protocol error `ec` is set, last_parse_error() says why, and the caller
  // must drop the connection (then call on_disconnect).
  std::size_t on_read(std::string_view data, boost::system::error_code& ec);
  const std::string& last_parse_error() const { return parse_error_; }

 private:
  std::string write_buffer_;
  reply scratch_;
  std::string parse_error_;
};

}  // namespace sluice::memcache
