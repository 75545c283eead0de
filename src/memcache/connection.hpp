#pragma once
// One pipelined connection to one memcached node, living on one worker's io_context: exec() queues a request
// and every request queued while a write is in flight leaves in the next write (memcache::pipeline). The
// connection keeps itself up: on any failure it fails the requests already written and reconnects with
// jittered exponential backoff. While it is down exec() fails at once with error::not_connected, so a
// decision never waits on a node that is down (only the first attempt, at start-up, is waited for).

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/link_settings.hpp"
#include "memcache/pipeline.hpp"

namespace sluice::memcache {

// The link settings (reconnecting with the same backoff as at start-up), and where and how to connect.
struct connection_config : core::link_settings {
  connection_config() { request_timeout = std::chrono::milliseconds{500}; }
  std::string address;  // host:port
  std::chrono::milliseconds connect_timeout{1'000};
  std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain TCP; used on this worker only
  bool skip_hostname_verification = false;
};

class connection {
 public:
  connection(boost::asio::any_io_executor ex, connection_config config);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // Starts connecting (and reconnecting).
  void start();
  // Fails every request with error::shutting_down and closes; no reconnect afterwards. Any thread.
  void stop();
  // On the executor's thread. `request->done` is called exactly once, possibly inline (not connected).
  void exec(std::shared_ptr<pending_request> request);
  bool connected() const;  // any thread
  // Connected, or still making its first connection (requests then wait for it).
  bool accepting() const;
  std::string last_error() const;  // "" while connected; any thread

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace sluice::memcache
