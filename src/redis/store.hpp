#pragma once
// Where requests go: one Redis (redis::pool, also behind sentinels) or a Redis Cluster (redis::cluster).
// Users such as the rate limit backend talk to this interface and never to a concrete topology.

#include <boost/system/error_code.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "redis/pipeline.hpp"

namespace sluice::redis {

// upstream's pool stats (ratelimit.redis_pool.*): cx_active, cx_total, cx_local_close.
struct connection_stats {
  std::size_t active = 0;
  std::uint64_t opened = 0;
  std::uint64_t closed_locally = 0;
};

class store {
 public:
  // Called on every change of up(): possibly on any thread.
  using observer = std::function<void()>;

  virtual ~store() = default;
  virtual void start(observer on_change) = 0;
  virtual void stop() = 0;
  // Sends `request`; `key` is the key its commands are about (it chooses the node in a cluster). `done` may
  // be called inline, on the caller's thread, when nothing can be reached.
  virtual void exec(std::shared_ptr<pending_request> request, std::string_view key) = 0;
  // True when a request may carry commands about one key only (a cluster routes each key to its own node).
  virtual bool one_key_per_request() const = 0;
  // Whether requests can be served now.
  virtual bool up() const = 0;
  // What a caller tells its client when a request failed with `ec`.
  virtual std::string describe(boost::system::error_code ec) const = 0;
  // Why the store is down ("" when nothing is known).
  virtual std::string last_error() const = 0;
  virtual connection_stats stats() const = 0;
  // Connections waiting to retry after a failure retry now: another store (another worker's) has just reached
  // the same server, so it is likely back.
  virtual void retry_now() {}
};

}  // namespace sluice::redis
