#include "auth/jwks_cache.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/log.hpp"

namespace sluice::auth {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

namespace {

// One fetch in flight; every request that needs it parks its completion handler here.
struct pending_fetch {
  std::mutex mutex;
  bool done = false;
  std::shared_ptr<const jwk_set> keys;
  std::vector<std::function<void()>> waiters;

  void finish(std::shared_ptr<const jwk_set> result) {
    std::vector<std::function<void()>> ready;
    {
      std::lock_guard lock(mutex);
      done = true;
      keys = std::move(result);
      ready.swap(waiters);
    }
    for (auto& resume : ready) resume();
  }

  asio::awaitable<void> wait() {
    return asio::async_initiate<decltype(asio::use_awaitable), void()>(
        [this](auto handler) {
          // Resume each waiter on its own executor (requests may run on different io threads).
          auto ex = asio::get_associated_executor(handler);
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          std::function<void()> resume = [ex, shared] {
            asio::post(ex, [shared] { std::move (*shared)(); });
          };
          std::unique_lock lock(mutex);
          if (done) {
            lock.unlock();
            resume();
            return;
          }
          waiters.push_back(std::move(resume));
        },
        asio::use_awaitable);
  }
};

struct entry {
  std::shared_ptr<const jwk_set> keys;
  steady::time_point fetched_at;
  std::optional<steady::time_point> refreshed_at;
  std::optional<steady::time_point> failed_at;
  std::shared_ptr<pending_fetch> pending;
};

// optional, not time_point::min(): `now - min()` overflows.
bool within(const std::optional<steady::time_point>& since, steady::time_point now, steady::duration d) {
  return since && now - *since < d;
}

}  // namespace

struct jwks_cache::state {
  asio::any_io_executor ex;
  fetch_function fetch;
  jwks_timing timing;
  std::mutex mutex;
  std::unordered_map<std::string, entry> entries;

  bool fresh(const entry& e, steady::time_point now) const {
    return e.keys && now - e.fetched_at < timing.ttl;
  }

  // Static, with `self` as a parameter: the coroutine frame keeps the state alive while the fetch runs.
  static asio::awaitable<void> run_fetch(std::shared_ptr<state> self, std::string uri,
                                         std::shared_ptr<pending_fetch> pending) {
    auto result = co_await self->fetch(uri);
    std::shared_ptr<const jwk_set> keys;
    if (result.error.empty()) {
      auto parsed = parse_jwks(result.body);
      if (auto* set = std::get_if<jwk_set>(&parsed))
        keys = std::make_shared<const jwk_set>(std::move(*set));
      else
        result.error = std::get<std::string>(parsed);
    }
    if (!keys) core::log_warn("fetching JWKS from ", uri, " failed: ", result.error);
    {
      std::lock_guard lock(self->mutex);
      auto& e = self->entries[uri];
      e.pending.reset();
      if (keys) {
        e.keys = keys;
        e.fetched_at = steady::now();
      } else {
        e.failed_at = steady::now();
      }
    }
    pending->finish(std::move(keys));
  }
};

jwks_cache::jwks_cache(asio::any_io_executor ex, fetch_function fetch, jwks_timing timing)
    : state_(std::make_shared<state>()) {
  state_->ex = std::move(ex);
  state_->fetch = std::move(fetch);
  state_->timing = timing;
}

asio::awaitable<std::shared_ptr<const jwk_set>> jwks_cache::get(std::string uri, bool refresh) {
  std::shared_ptr<pending_fetch> pending;
  bool start = false;
  {
    std::lock_guard lock(state_->mutex);
    auto& e = state_->entries[uri];
    auto now = steady::now();
    bool fresh = state_->fresh(e, now);
    if (fresh && (!refresh || within(e.refreshed_at, now, state_->timing.refresh_interval))) co_return e.keys;
    if (!e.pending && within(e.failed_at, now, state_->timing.failure_backoff))
      co_return fresh ? e.keys : nullptr;
    if (!e.pending) {
      e.pending = std::make_shared<pending_fetch>();
      if (refresh) e.refreshed_at = now;
      start = true;
    }
    pending = e.pending;
  }
  // Outside the lock: co_spawn may run the fetch inline up to its first suspension (file:// has none).
  if (start) asio::co_spawn(state_->ex, state::run_fetch(state_, uri, pending), asio::detached);
  co_await pending->wait();
  if (pending->keys) co_return pending->keys;
  std::lock_guard lock(state_->mutex);
  // A failed early refresh keeps the keys that are still fresh.
  auto& e = state_->entries[uri];
  co_return state_->fresh(e, steady::now()) ? e.keys : nullptr;
}

}  // namespace sluice::auth
