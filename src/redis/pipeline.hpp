#pragma once
// The multiplexer of one connection, without I/O (Boost.Redis' model; the queue itself is
// core::request_queue): requests queue up; everything queued while a write is in flight leaves together in
// the next single write; replies are matched to requests in FIFO order. When the connection drops, requests
// already written fail (their replies can never come) and requests not yet written stay queued for the next
// connection.

#include <boost/system/error_code.hpp>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/request_queue.hpp"
#include "redis/reply_scanner.hpp"
#include "redis/resp.hpp"

namespace sluice::redis {

// One request in flight: its bytes, how many replies it expects, and who to tell. `done` is called exactly
// once: with success and all replies (a Redis error reply is a value among them), or with an error code.
struct pending_request {
  std::string payload;
  std::size_t expected_replies = 0;
  // Reset to null by a caller that gave up (a request timeout): the replies are still consumed, then dropped.
  std::function<void(boost::system::error_code, std::vector<value>&&)> done;
  std::vector<value> replies;  // filled as replies arrive
};

class pipeline : public core::request_queue<pending_request> {
 public:
  // Coalesces every unwritten request into one buffer (at most `max_requests` of them when non-zero) and
  // marks them written. The buffer stays valid until the next call. Requests expecting no reply complete
  // here; if one's `done` calls prepare_write, that call returns nothing and what it would have sent goes
  // with the next write.
  std::string_view prepare_write(std::size_t max_requests = 0);
  // Feeds received bytes: completes requests whose replies are all in. Returns the number of bytes consumed
  // (the caller keeps the rest for the next call). On a protocol error, `ec` is set and the caller must drop
  // the connection (then call on_disconnect).
  std::size_t on_read(std::string_view data, boost::system::error_code& ec);

 private:
  void forget_reading() override { scanner_.reset(); }

  std::string write_buffer_;
  reply_scanner scanner_;  // how far the reply at the front of the read buffer has been seen
  value scratch_;
  bool completing_ = false;  // prepare_write is calling `done` of requests that expect no reply
};

}  // namespace sluice::redis
