#pragma once
// A fixed set of pipelined connections to one Redis (REDIS_POOL_SIZE), directly or behind sentinels: requests
// are spread round-robin over the connections that are up. With none up, a request waits for a connection
// still making its first attempt, or else fails at once with error::not_connected — its `done` is then called
// inline, on the caller's thread.

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "redis/connection.hpp"
#include "redis/sentinel_watch.hpp"
#include "redis/store.hpp"

namespace sluice::redis {

class pool final : public store {
 public:
  pool(boost::asio::any_io_executor ex, const connection_config& config, std::size_t size);
  ~pool() override;

  void start(observer on_change) override;
  void stop() override;
  void exec(std::shared_ptr<pending_request> request, std::string_view key = {}) override;
  bool one_key_per_request() const override { return false; }
  bool up() const override { return connected_count() > 0; }
  std::string describe(boost::system::error_code ec) const override;
  std::string last_error() const override;
  connection_stats stats() const override;
  void retry_now() override;

  // A connection is up or still making its first attempt: a request sent now is not refused.
  bool accepting() const;
  std::size_t connected_count() const { return connected_.load(std::memory_order_acquire); }
  const connection_config& config() const { return connections_.front()->config(); }

  static constexpr std::size_t commands_per_turn = 256;

 private:
  std::vector<std::shared_ptr<connection>> connections_;
  std::unique_ptr<sentinel_watch> watch_;  // behind sentinels: follows +switch-master
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> connected_{0};
};

}  // namespace sluice::redis
