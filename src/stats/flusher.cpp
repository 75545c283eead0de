#include "stats/flusher.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>

#include "core/log.hpp"
#include "core/use_tuple.hpp"

namespace sluice::stats {

namespace asio = boost::asio;

flusher::flusher(store& s, std::chrono::milliseconds interval)
    : store_(s), interval_(std::max(interval, std::chrono::milliseconds(1))) {}

flusher::~flusher() {
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
  if (observing_) store_.set_timer_observer(nullptr);
  sink_.reset();
}

void flusher::start(std::unique_ptr<sink> k, timer_observer* observer) {
  sink_ = std::move(k);
  if (observer != nullptr) {
    store_.set_timer_observer(observer);
    observing_ = true;
  }
  asio::co_spawn(ioc_, loop(), asio::detached);
  thread_ = std::thread([this] { ioc_.run(); });
}

asio::awaitable<void> flusher::loop() {
  timer_.expires_after(interval_);
  for (;;) {
    auto [ec] = co_await timer_.async_wait(core::use_tuple);
    if (ec) co_return;
    // A ticker: the next flush is one interval after the previous tick, unless this flush ran past it.
    auto next = timer_.expiry() + interval_;
    timer_.expires_at(std::max(next, std::chrono::steady_clock::now()));
    try {
      store_.run_generators();
      sink_->flush(store_);
    } catch (const std::exception& e) {
      core::log_error("stats flush failed: ", e.what());
    }
  }
}

}  // namespace sluice::stats
