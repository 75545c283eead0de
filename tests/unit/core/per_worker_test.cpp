// core::per_worker: each object is reached on its own worker's thread, results come back in worker order, and
// work sent once the workers stop is dropped or refused, never left waiting. Run under TSan too (unit_core).

#include <doctest/doctest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <thread>

#include "core/per_worker.hpp"

using namespace sluice;
namespace asio = boost::asio;

namespace {

struct slot {
  unsigned index = 0;
  std::thread::id built_on;
  std::thread::id ran_on;  // written on the worker's thread only
  int posts = 0;           // likewise
};

// Runs `work` on a control io_context of its own thread and waits for it.
template <typename Awaitable>
auto run_on_control(asio::io_context& control, Awaitable work) {
  auto done = asio::co_spawn(control, std::move(work), asio::use_future);
  std::thread runner([&control] { control.run(); });
  runner.join();
  control.restart();
  return done.get();
}

}  // namespace

TEST_CASE("per_worker: built in order, one object per worker, each reached on its own thread") {
  core::worker_pool pool(3);
  core::per_worker<slot> slots(pool);
  CHECK(slots.workers() == 3);
  CHECK(slots.empty());
  slots.build([](slot& s, unsigned i, asio::io_context&) {
    s.index = i;
    s.built_on = std::this_thread::get_id();
  });
  REQUIRE(slots.size() == 3);
  pool.start();

  asio::io_context control(1);
  auto threads = run_on_control(control, slots.on_each([](slot& s, unsigned i) -> std::thread::id {
    CHECK(s.index == i);
    s.ran_on = std::this_thread::get_id();
    return s.ran_on;
  }));
  REQUIRE(threads.size() == 3);
  CHECK(threads[0] != threads[1]);
  CHECK(threads[1] != threads[2]);
  CHECK(threads[0] != std::this_thread::get_id());

  // post_each: later, on the same threads as on_each found.
  std::atomic<int> left{3};
  slots.post_each([&left](slot& s) {
    ++s.posts;
    CHECK(std::this_thread::get_id() == s.ran_on);
    left.fetch_sub(1);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (left.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(left.load() == 0);

  // An awaitable f: awaited on the worker, its value returned.
  auto posts =
      run_on_control(control, slots.on_each([](slot& s) -> asio::awaitable<int> { co_return s.posts; }));
  CHECK(posts == std::vector<int>{1, 1, 1});
  pool.release();
  pool.stop();
  for (const auto& s : slots) CHECK(s.built_on == std::this_thread::get_id());
}

TEST_CASE("per_worker: a view shows one part of each object, and outlives the expression it came from") {
  struct whole {
    int part = 0;
  };
  core::worker_pool pool(2);
  core::per_worker<whole> all(pool);
  all.build([](whole& w, unsigned i, asio::io_context&) { w.part = static_cast<int>(10 * (i + 1)); });
  pool.start();
  auto view = all.view<int>([](whole& w) -> int& { return w.part; });
  asio::io_context control(1);
  auto parts = run_on_control(control, view.on_each([](int& part) { return part; }));
  CHECK(parts == std::vector<int>{10, 20});
  // The awaitable keeps its own copy of the view.
  auto awaitable = core::worker_view<int>(view).on_each([](int& part) { return part + 1; });
  CHECK(run_on_control(control, std::move(awaitable)) == std::vector<int>{11, 21});
  pool.release();
  pool.stop();
}

TEST_CASE("per_worker: once the workers are released, post_each drops and on_each refuses") {
  core::worker_pool pool(2);
  core::per_worker<slot> slots(pool);
  slots.build([](slot&, unsigned, asio::io_context&) {});
  pool.start();
  CHECK(pool.accepting());
  pool.release();
  CHECK_FALSE(pool.accepting());
  std::atomic<int> ran{0};
  slots.post_each([&ran](slot&) { ran.fetch_add(1); });
  asio::io_context control(1);
  CHECK_THROWS_AS(run_on_control(control, slots.on_each([](slot&) { return 1; })), core::workers_stopped);
  pool.stop();
  CHECK(ran.load() == 0);
}
