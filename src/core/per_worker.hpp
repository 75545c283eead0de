#pragma once
// One object per worker, and the one way other threads reach the workers (Seastar's sharded<T> with
// invoke_on_all, Envoy's TypedSlot<T> with runOnAllThreads). Worker i's object is used on worker i's thread
// only, once the workers run; before they start and after they stop, the thread that builds them may use
// every one. Work sent to the workers after worker_pool::release() is dropped (a post_each) or refused with
// workers_stopped (an on_each): an io_context that has run out of work would never run it, and an awaiting
// caller would wait for ever.
//
// tests/structure/check_ownership.py fails the suite when code elsewhere posts or spawns onto a worker's
// io_context by index.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <functional>
#include <type_traits>
#include <vector>

#include "core/workers.hpp"

namespace sluice::core {

namespace detail {

template <class T>
struct is_awaitable : std::false_type {};
template <class R>
struct is_awaitable<boost::asio::awaitable<R>> : std::true_type {};

// f(item) or f(item, worker index), whichever f takes.
template <class F, class U>
decltype(auto) call_on(F& f, U& item, unsigned worker) {
  if constexpr (std::is_invocable_v<F&, U&, unsigned>) {
    return f(item, worker);
  } else {
    return f(item);
  }
}

template <class F, class U>
using call_result = decltype(call_on(std::declval<F&>(), std::declval<U&>(), 0u));

template <class R>
struct awaited_of {
  using type = R;
};
template <class R>
struct awaited_of<boost::asio::awaitable<R>> {
  using type = R;
};
// What on_each gives back for one worker: f's result, or what f's awaitable gives.
template <class F, class U>
using result_of = typename awaited_of<call_result<F, U>>::type;

// The fan-out over any way to find worker i's object.
template <class U, class Get>
class fan_out {
 public:
  fan_out(worker_pool& pool, Get get) : pool_(&pool), get_(std::move(get)) {}

  unsigned size() const { return pool_->size(); }

  // Runs f(U&) (or f(U&, i)) on each worker's thread, later. Thread-safe; nothing once the workers stop.
  template <class F>
  void post_each(F f) const {
    if (!pool_->accepting()) return;
    for (unsigned i = 0; i < pool_->size(); ++i) {
      boost::asio::post(pool_->context(i), [f, &item = get_(i), i]() mutable { call_on(f, item, i); });
    }
  }

  // Awaits f on each worker in turn (its thread, its executor), from the caller's executor; the results in
  // worker order (none for a void f). Throws workers_stopped when the workers stop first. The awaitable holds
  // a copy of this view: it may outlive the view it came from.
  template <class F>
  auto on_each(F f) const {
    return each(*this, std::move(f));
  }

 private:
  template <class F>
  static auto each(fan_out self, F f) -> boost::asio::awaitable<
      std::conditional_t<std::is_void_v<result_of<F, U>>, void, std::vector<result_of<F, U>>>> {
    using R = result_of<F, U>;
    if constexpr (std::is_void_v<R>) {
      for (unsigned i = 0; i < self.size(); ++i) co_await self.on(i, f);
    } else {
      std::vector<R> results;
      results.reserve(self.size());
      for (unsigned i = 0; i < self.size(); ++i) results.push_back(co_await self.on(i, f));
      co_return results;
    }
  }

  template <class F>
  boost::asio::awaitable<result_of<F, U>> on(unsigned i, F& f) const {
    if (!pool_->accepting()) throw workers_stopped{};
    auto& item = get_(i);
    co_return co_await boost::asio::co_spawn(
        pool_->context(i),
        [&f, &item, i]() -> boost::asio::awaitable<result_of<F, U>> {
          if constexpr (is_awaitable<call_result<F, U>>::value) {
            co_return co_await call_on(f, item, i);
          } else {
            co_return call_on(f, item, i);
          }
        },
        boost::asio::use_awaitable);
  }

  worker_pool* pool_;
  Get get_;
};

}  // namespace detail

// A view of one part of each worker's object, for a module that must not see the whole (the operator's APIs
// see each worker's rate limit service, not the composition root's worker_apis).
template <class U>
using worker_view = detail::fan_out<U, std::function<U&(unsigned)>>;

template <class T>
class per_worker {
 public:
  explicit per_worker(worker_pool& pool) : pool_(pool) {}
  per_worker(const per_worker&) = delete;
  per_worker& operator=(const per_worker&) = delete;

  // Before the workers start: fill(object, i, worker i's io_context) for each worker, in order.
  template <class Fill>
  void build(Fill fill) {
    for (unsigned i = 0; i < pool_.size(); ++i) fill(items_.emplace_back(), i, pool_.context(i));
  }

  unsigned workers() const { return pool_.size(); }
  // The objects built: workers(), or 0 before build().
  unsigned size() const { return static_cast<unsigned>(items_.size()); }
  bool empty() const { return items_.empty(); }
  // Worker i's object: on worker i's thread, or on the building thread while the workers do not run.
  T& operator[](unsigned i) { return items_[i]; }
  const T& operator[](unsigned i) const { return items_[i]; }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  template <class F>
  void post_each(F f) {
    fan_out().post_each(std::move(f));
  }
  // The awaitable needs this per_worker alive until it is done (as it needs the objects).
  template <class F>
  auto on_each(F f) {
    return fan_out().on_each(std::move(f));
  }
  // `part` picks what the view shows of each worker's object.
  template <class U, class Part>
  worker_view<U> view(Part part) {
    return worker_view<U>(pool_, [this, part](unsigned i) -> U& { return part(items_[i]); });
  }

 private:
  auto fan_out() {
    return detail::fan_out<T, std::function<T&(unsigned)>>(pool_,
                                                           [this](unsigned i) -> T& { return items_[i]; });
  }

  worker_pool& pool_;
  std::deque<T> items_;  // a deque: an object's address never changes
};

}  // namespace sluice::core
