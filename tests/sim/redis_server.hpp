#pragma once
// A redis-server of the simulator's own (the Redis legs): started on a unix socket in a fresh directory, with
// nothing saved, and stopped with it. One per world, so a seed starts from an empty Redis and replays
// exactly.

#include <sys/types.h>

#include <string>

#include "../support/temp_dir.hpp"

namespace sluice::sim {

class redis_server {
 public:
  // Throws std::runtime_error when redis-server cannot be started or does not answer within 10 s.
  redis_server();
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  const std::string& socket_path() const { return socket_; }

 private:
  testing::temp_dir dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace sluice::sim
