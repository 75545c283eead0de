#pragma once
// Redis Cluster: a pool per master, the slot map read with CLUSTER SLOTS from any reachable node (at start,
// every 2 s, and after a redirection), each request sent to the master of its key's slot. `-MOVED` updates
// the map and resends to the named node; `-ASK` resends once to the named node behind ASKING. Requests about
// keys on different nodes travel in parallel, each node's connections pipelining whatever is in flight.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redis/pool.hpp"
#include "redis/store.hpp"

namespace sluice::redis {

class cluster final : public store {
 public:
  // `seeds`: host:port of some nodes; `base` gives every node's connection settings (auth, TLS, timeouts).
  cluster(boost::asio::any_io_executor ex, connection_config base, std::vector<std::string> seeds,
          std::size_t pool_size);
  ~cluster() override;

  void start(observer on_change) override;
  void stop() override;
  void exec(std::shared_ptr<pending_request> request, std::string_view key) override;
  bool one_key_per_request() const override { return true; }
  bool up() const override;
  std::string describe(boost::system::error_code ec) const override;
  std::string last_error() const override;
  connection_stats stats() const override;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace sluice::redis
