#pragma once
// The multiplexer of one memcached connection, without I/O (as redis::pipeline; the queue itself is
// core::request_queue): what is queued while a write is in flight leaves together in the next single write;
// replies are matched to requests in FIFO order, each decoded as the kind of command it answers.
//
// The get-multis of the requests that leave together are merged into one `get`, ahead of their other
// commands: memcached 1.6 sends its replies so far after every `get` (one TCP segment each), so one get per
// decision cost both sides a segment per decision (measured in BENCHMARKS.md, issue 14). memcached answers
// the keys of a get in the order asked, hits only, so the merged reply is dealt back to the requests by
// walking their keys in order.

#include <boost/system/error_code.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/request_queue.hpp"
#include "memcache/protocol.hpp"

namespace sluice::memcache {

// One request: the keys of its get-multi (add_get_key's list; may be empty), its other commands' bytes and
// the kind of each in order, and who to tell. A request asks for at least one key or one command. `done` is
// called exactly once: with success and the replies (the get's first, as a `values` reply holding this
// request's hits, then one per command; CLIENT_ERROR and the like are values), or with an error code and no
// replies.
struct pending_request {
  std::string get_keys;
  std::string payload;
  std::vector<reply_kind> expected;
  // Reset to null by a caller that gave up (a request timeout): the replies are still consumed, then dropped.
  std::function<void(boost::system::error_code, std::vector<reply>&&)> done;
  std::vector<reply> replies;  // filled as replies arrive
};

// The replies a request waits for: one for its get-multi, if it asks for keys, and one per command.
std::size_t replies_wanted(const pending_request& r);

class pipeline : public core::request_queue<pending_request> {
 public:
  // memcached reads a command line into a 16 KiB buffer and copies a longer get line aside; a merged get
  // stops short of that, and the next requests' keys go into another get.
  static constexpr std::size_t max_merged_get_bytes = 8192;

  // Coalesces every unwritten request into one buffer and marks them written. The buffer stays valid until
  // the next call.
  std::string_view prepare_write();
  // Feeds received bytes: completes requests whose replies are all in. Returns the number of bytes consumed
  // (the caller keeps the rest). On a protocol error `ec` is set, last_parse_error() says why, and the caller
  // must drop the connection (then call on_disconnect).
  std::size_t on_read(std::string_view data, boost::system::error_code& ec);

 private:
  void forget_reading() override { groups_.clear(); }

  // Requests written together after one merged get (or none, when none of them asks for a key).
  struct group {
    std::size_t requests;
    bool get_pending;
  };
  // Deals the merged get's reply to the first `requests` requests; false (and parse_error_) when memcached
  // answered a key that was not asked for, or out of order.
  bool deal_values(std::size_t requests, reply& merged);
  // Completes the requests at the front whose replies are all in.
  void complete_ready();

  std::deque<group> groups_;  // one per merged get of the requests written, oldest first
  std::string write_buffer_;
  reply scratch_;
};

}  // namespace sluice::memcache
