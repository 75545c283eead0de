#pragma once
// Flushes the store to the active sink every STATS_FLUSH_INTERVAL, as gostats' ticker does: the generators
// run, then sink.flush(). The flusher has its own thread and io_context, which the sink's sockets use too, so
// a slow statsd server or a blocked stderr never delays a request, and the stats never keep the server's
// io_context from stopping. Upstream does not flush on exit; neither does this.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <thread>

#include "stats/sink.hpp"
#include "stats/store.hpp"

namespace sluice::stats {

class flusher {
 public:
  flusher(store& s, std::chrono::milliseconds interval);
  // Stops the thread, detaches the timer observer, then destroys the sink. Destroy it only once no thread
  // records timers any more.
  ~flusher();
  flusher(const flusher&) = delete;
  flusher& operator=(const flusher&) = delete;

  // Where the sink's sockets live (build the sink with it, then start).
  boost::asio::any_io_executor executor() { return ioc_.get_executor(); }

  // Takes the sink; `observer` (the sink itself, or null) receives every timer observation until the end.
  void start(std::unique_ptr<sink> k, timer_observer* observer);

 private:
  boost::asio::awaitable<void> loop();

  store& store_;
  const std::chrono::milliseconds interval_;
  boost::asio::io_context ioc_{1};
  boost::asio::steady_timer timer_{ioc_};
  std::unique_ptr<sink> sink_;
  bool observing_ = false;
  std::thread thread_;
};

}  // namespace sluice::stats
