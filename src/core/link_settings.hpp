#pragma once
// How a pipelined client connection (core/pipelined_link.hpp) times its requests, backs off and logs: the
// part of Redis's and memcached's connection settings they share.

#include <chrono>

namespace sluice::core {

struct link_settings {
  std::chrono::milliseconds request_timeout{200};  // no reply within this: the request fails
  // Backoff between attempts (doubling, jittered to [b/2, b]): `startup_*` until the first connection is
  // made, `reconnect_*` after a connection is lost.
  std::chrono::milliseconds startup_min{50};
  std::chrono::milliseconds startup_max{2'000};
  std::chrono::milliseconds reconnect_min{50};
  std::chrono::milliseconds reconnect_max{2'000};
  std::chrono::microseconds write_window{0};  // >0: wait this long before a write to gather more requests
  bool log_state_changes = true;              // a pool's connections share a fate: one of them speaks for all
};

}  // namespace sluice::core
