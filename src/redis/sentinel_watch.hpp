#pragma once
// Listens to the sentinels for `+switch-master` so a graceful failover is followed at once: the old master
// stays writable (and keeps taking counts the new master never sees) until the sentinels demote it, which can
// take seconds. One subscription per pool, to one sentinel at a time, moving on to the next when it drops.

#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>

#include "redis/connection.hpp"

namespace sluice::redis {

class sentinel_watch {
 public:
  // `on_switch` runs (on the watch's strand) each time the sentinels announce a new master for our master
  // name.
  sentinel_watch(boost::asio::any_io_executor ex, sentinel_config config, std::function<void()> on_switch);
  ~sentinel_watch();
  void start();
  void stop();

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace sluice::redis
