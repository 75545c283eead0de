#pragma once
// grpc.health.v1.Health on one worker: Check, and Watch (server streaming: the current status at once, then
// every change). The named service (GRPC_HEALTH_SERVICE, "ratelimit" as upstream) follows the process health;
// the empty name, meaning the whole server, is SERVING while the server runs (grpc-go's default, kept by
// upstream); any other name is NOT_FOUND for Check and SERVICE_UNKNOWN for Watch.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/grpc/method_table.hpp"

namespace sluice::net::grpc {

class health_service {
 public:
  // `healthy` reads the process health (thread-safe); `on_check` counts each Check call (stats).
  health_service(std::string service_name, std::function<bool()> healthy,
                 std::function<void()> on_check = {});

  void add_to(method_table& methods);
  // The process health changed: tell every Watch on this worker (call on the worker's thread).
  void notify();

 private:
  void check(const std::shared_ptr<call>& c);
  void watch(const std::shared_ptr<call>& c);
  void sweep();
  int status_of(const std::string& name) const;  // HealthCheckResponse::ServingStatus, -1: not found

  struct watcher {
    std::weak_ptr<grpc::call> stream;
    std::string service;
    int last_sent = -1;
  };

  std::string service_name_;
  std::function<bool()> healthy_;
  std::function<void()> on_check_;
  std::vector<watcher> watchers_;
};

}  // namespace sluice::net::grpc
