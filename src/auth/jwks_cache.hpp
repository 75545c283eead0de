#pragma once
// Key sets per JWKS URI: fetched lazily, kept for `ttl`, refetched early when a token names an unknown kid
// (at most once per `refresh_interval`, so random kids cannot make Sluice hammer the key server). Concurrent
// requests for the same URI share one fetch.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "auth/jwks.hpp"
#include "auth/jwks_fetcher.hpp"

namespace sluice::auth {

struct jwks_timing {
  std::chrono::seconds ttl{300};
  std::chrono::seconds refresh_interval{30};
  std::chrono::milliseconds failure_backoff{1000};  // after a failed fetch, fail fast instead of refetching
};

class jwks_cache {
 public:
  using fetch_function = std::function<boost::asio::awaitable<fetch_result>(std::string uri)>;

  // Fetches run on `ex`, detached from the requests waiting for them.
  jwks_cache(boost::asio::any_io_executor ex, fetch_function fetch, jwks_timing timing);

  // The keys for `uri`, or null when they could not be fetched. `refresh`: the cached set lacks a needed kid.
  boost::asio::awaitable<std::shared_ptr<const jwk_set>> get(std::string uri, bool refresh);

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace sluice::auth
