#pragma once
// Request timeouts of a pipelined client connection (Redis, memcached): every request shares one timeout, so
// the oldest deadline is always at the front and one timer serves them all. `Request` has `done` (null once
// answered or given up).

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <utility>
#include "core/use_tuple.hpp"

namespace sluice::core {

template <typename Request>
class request_deadlines {
 public:
  using clock_type = std::chrono::steady_clock;

  explicit request_deadlines(boost::asio::steady_timer& timer) : timer_(timer) {}

  void add(const std::shared_ptr<Request>& request, std::chrono::milliseconds timeout) {
    entries_.emplace_back(request, clock_type::now() + timeout);
    if (entries_.size() == 1) timer_.cancel();  // run() waits for an hour when nothing is pending
  }

  // Until `stopping` is set (then cancel the timer): calls expire(request) for each request still unanswered
  // at its deadline.
  template <typename Expire>
  boost::asio::awaitable<void> run(const std::atomic<bool>& stopping, Expire expire) {
    while (!stopping) {
      while (!entries_.empty()) {
        auto front = entries_.front().first.lock();
        if (front && front->done) break;
        entries_.pop_front();
      }
      timer_.expires_at(entries_.empty() ? clock_type::now() + std::chrono::hours(1)
                                         : entries_.front().second);
      co_await timer_.async_wait(use_tuple);
      const auto now = clock_type::now();
      while (!entries_.empty() && entries_.front().second <= now) {
        auto request = entries_.front().first.lock();
        entries_.pop_front();
        if (request && request->done) expire(request);
      }
    }
  }

  // run() for a pipeline (`cancel_unwritten(Request*, error)`, static `finish(Request&, error, reply)`): a
  // request past its deadline is taken back if it was not written yet, else answered with `timeout` (its
  // reply, when it comes, is matched and dropped).
  template <typename Pipeline, typename Error>
  boost::asio::awaitable<void> expire_from(const std::atomic<bool>& stopping, Pipeline& requests,
                                           Error timeout) {
    co_await run(stopping, [&requests, timeout](const std::shared_ptr<Request>& request) {
      if (!requests.cancel_unwritten(request.get(), timeout)) Pipeline::finish(*request, timeout, {});
    });
  }

 private:
  boost::asio::steady_timer& timer_;
  std::deque<std::pair<std::weak_ptr<Request>, clock_type::time_point>> entries_;
};

}  // namespace sluice::core
