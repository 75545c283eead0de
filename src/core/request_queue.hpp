#pragma once
// The bookkeeping both pipelined clients (Redis, memcached) share, without I/O: requests in FIFO order, the
// written ones first; replies go to the oldest written request. When the connection drops the written
// requests fail (their replies can never come) and the unwritten ones stay for the next connection.
// `Request` has `done` (a std::function taking an error code and the replies, called at most once) and
// `replies` (a vector). A protocol's pipeline derives from this and adds encoding and decoding.

#include <algorithm>
#include <boost/system/error_code.hpp>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::core {

template <typename Request>
class request_queue {
 public:
  using pointer = std::shared_ptr<Request>;

  // Queues a request; it goes out with the next write.
  void enqueue(pointer request) {
    queue_.push_back(std::move(request));
    ++unwritten_;
  }
  bool has_unwritten() const { return unwritten_ > 0; }
  std::size_t size() const { return queue_.size(); }
  std::size_t written() const { return written_; }

  virtual ~request_queue() = default;

  // The connection is gone: every written request fails with `ec`; unwritten ones stay queued.
  void on_disconnect(boost::system::error_code ec) {
    forget_reading();
    const auto last = queue_.begin() + static_cast<std::ptrdiff_t>(written_);
    std::vector<pointer> failed(queue_.begin(), last);
    queue_.erase(queue_.begin(), last);
    written_ = 0;
    fail_each(failed, ec);
  }
  // Fails every request, written or not (shutdown).
  void fail_all(boost::system::error_code ec) {
    forget_reading();
    std::vector<pointer> failed(queue_.begin(), queue_.end());
    queue_.clear();
    written_ = 0;
    unwritten_ = 0;
    fail_each(failed, ec);
  }
  // Removes a request not written yet and fails it with `ec` (a request timeout); false for a written one,
  // whose replies would otherwise be matched to the wrong request.
  bool cancel_unwritten(const Request* request, boost::system::error_code ec) {
    const auto it = std::find_if(queue_.begin() + static_cast<std::ptrdiff_t>(written_), queue_.end(),
                                 [request](const auto& r) { return r.get() == request; });
    if (it == queue_.end()) return false;
    const pointer cancelled = std::move(*it);
    queue_.erase(it);
    --unwritten_;
    finish(*cancelled, ec, {});
    return true;
  }

  // What was wrong with the stream when the protocol's on_read last reported a protocol error (for the log).
  const std::string& last_parse_error() const { return parse_error_; }

  // Calls `done` at most once: it is taken out first, so a re-entrant call cannot see it again.
  static void finish(Request& request, boost::system::error_code ec, decltype(Request::replies)&& replies) {
    if (auto done = std::exchange(request.done, nullptr)) done(ec, std::move(replies));
  }

 protected:
  // What a protocol keeps between reads about the replies of written requests (a reply half scanned, merged
  // gets in flight): forgotten with them, on a disconnect or a failure of all.
  virtual void forget_reading() {}
  // The oldest written request has all its replies: it leaves the queue before its `done` runs (which may
  // enqueue, cancel or fail requests).
  void complete_front() {
    const pointer front = std::move(queue_.front());
    queue_.pop_front();
    --written_;
    auto replies = std::move(front->replies);
    front->replies.clear();
    finish(*front, {}, std::move(replies));
  }

  // Received bytes while no written request waits for a reply: the stream can no longer be matched to
  // requests (parse_error_ says so).
  bool unasked() {
    if (written_ > 0) return false;
    parse_error_ = "unexpected reply: no request is waiting for one";
    return true;
  }

  std::deque<pointer> queue_;  // written ones first, then unwritten
  std::size_t written_ = 0;    // the first `written_` entries of queue_ were written
  std::size_t unwritten_ = 0;  // queue_.size() - written_
  std::string parse_error_;

 private:
  // Callbacks run only once the queue is consistent again, since any of them may call back into it.
  static void fail_each(const std::vector<pointer>& requests, boost::system::error_code ec) {
    for (const auto& request : requests) {
      request->replies.clear();
      finish(*request, ec, {});
    }
  }
};

}  // namespace sluice::core
