// The JWKS cache with a counting fake fetch: shared fetches, expiry, rate-limited refresh, failures.

#include "auth/jwks_cache.hpp"

#include <doctest/doctest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>

#include "jwt_fixture.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sluice::auth::fetch_result;
using sluice::auth::jwk_set;
using sluice::auth::jwks_cache;

struct counting_fetch {
  std::atomic<int> calls{0};
  std::string body = jwt_test::jwks({jwt_test::jwk_json(jwt_test::ec_key("P-256").get(), "k")});
  bool fail = false;

  jwks_cache::fetch_function function() {
    return [this](std::string) -> asio::awaitable<fetch_result> {
      ++calls;
      asio::steady_timer slow(co_await asio::this_coro::executor, 20ms);
      co_await slow.async_wait(asio::use_awaitable);
      co_return fail ? fetch_result{{}, "down"} : fetch_result{body, {}};
    };
  }
};

std::shared_ptr<const jwk_set> get(asio::io_context& io, jwks_cache& cache, bool refresh) {
  std::shared_ptr<const jwk_set> out;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { out = co_await cache.get("u", refresh); }, asio::detached);
  io.restart();
  io.run();
  return out;
}

}  // namespace

TEST_CASE("concurrent requests share one fetch, across io threads") {
  asio::io_context io;
  counting_fetch fetch;
  jwks_cache cache(io.get_executor(), fetch.function(), {});
  std::atomic<int> got{0};
  for (int i = 0; i < 50; ++i)
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          if (co_await cache.get("u", false)) ++got;
        },
        asio::detached);
  std::thread other([&] { io.run(); });
  io.run();
  other.join();
  CHECK(got == 50);
  CHECK(fetch.calls == 1);
  CHECK(get(io, cache, false));
  CHECK(fetch.calls == 1);
}

TEST_CASE("an unknown kid refetches at most once per interval") {
  asio::io_context io;
  counting_fetch fetch;
  jwks_cache cache(io.get_executor(), fetch.function(), {});
  CHECK(get(io, cache, false));
  CHECK(get(io, cache, true));
  CHECK(fetch.calls == 2);
  CHECK(get(io, cache, true));
  CHECK(fetch.calls == 2);
}

TEST_CASE("keys expire after the cache duration") {
  asio::io_context io;
  counting_fetch fetch;
  jwks_cache cache(io.get_executor(), fetch.function(), {.ttl = 0s});
  CHECK(get(io, cache, false));
  CHECK(get(io, cache, false));
  CHECK(fetch.calls == 2);
}

TEST_CASE("a failed fetch fails fast for a moment, then is retried") {
  asio::io_context io;
  counting_fetch fetch;
  fetch.fail = true;
  jwks_cache cache(io.get_executor(), fetch.function(), {.failure_backoff = 100ms});
  CHECK_FALSE(get(io, cache, false));
  CHECK_FALSE(get(io, cache, false));
  CHECK(fetch.calls == 1);
  std::this_thread::sleep_for(150ms);
  fetch.fail = false;
  CHECK(get(io, cache, false));
  CHECK(fetch.calls == 2);
}

TEST_CASE("a failed refresh keeps the keys that are still fresh") {
  asio::io_context io;
  counting_fetch fetch;
  jwks_cache cache(io.get_executor(), fetch.function(), {});
  auto first = get(io, cache, false);
  fetch.fail = true;
  CHECK(get(io, cache, true) == first);
}
