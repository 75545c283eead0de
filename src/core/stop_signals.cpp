#include "core/stop_signals.hpp"

#include <utility>

#include <boost/asio/post.hpp>

namespace sluice::core {

stop_signals::stop_signals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  thread_ = std::thread([this] { run(); });
}

stop_signals::~stop_signals() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  // To this thread only: its sigwait() returns, and it sees stopping_.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void stop_signals::run() {
  // No signal at all runs a handler here: this thread only waits.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  for (;;) {
    int signo = 0;
    if (sigwait(&set_, &signo) != 0) continue;
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (on_signal_)
      deliver(signo);
    else
      waiting_ = signo;
  }
}

void stop_signals::deliver(int signo) {
  boost::asio::post(executor_, [on_signal = on_signal_, signo] { on_signal(signo); });
}

void stop_signals::watch(boost::asio::any_io_executor executor, std::function<void(int)> on_signal) {
  std::lock_guard lock(mutex_);
  executor_ = std::move(executor);
  on_signal_ = std::move(on_signal);
  if (waiting_ != 0) deliver(std::exchange(waiting_, 0));
}

void stop_signals::unwatch() {
  std::lock_guard lock(mutex_);
  on_signal_ = nullptr;
  executor_ = {};
}

}  // namespace sluice::core
