#pragma once
// SIGTERM and SIGINT, taken by a thread of their own with sigwait() and handed to whoever watches for them on
// an executor. The two signals stay blocked in every other thread for the life of the process, so none of
// them ever runs an asynchronous handler: a signal cannot be lost between threads (under TSan, which defers
// asynchronous signals until the thread that took one enters an intercepted call, a SIGTERM once never
// reached the control loop), and one that comes during start-up waits until something watches.

#include <pthread.h>
#include <signal.h>

#include <functional>
#include <mutex>
#include <thread>

#include <boost/asio/any_io_executor.hpp>

namespace sluice::core {

class stop_signals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread, and so in every thread it starts from now on: make it
  // before any thread.
  stop_signals();
  ~stop_signals();
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

  // From now on each SIGTERM or SIGINT calls `on_signal(signo)` on `executor` (one that came before, since
  // the last watch, at once).
  void watch(boost::asio::any_io_executor executor, std::function<void(int)> on_signal);
  // No more calls; a signal from now on waits for the next watch().
  void unwatch();

 private:
  void run();
  void deliver(int signo);  // with mutex_ held

  sigset_t set_;
  std::mutex mutex_;
  boost::asio::any_io_executor executor_;
  std::function<void(int)> on_signal_;
  int waiting_ = 0;  // a signal nobody watched for yet (0: none)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::core
