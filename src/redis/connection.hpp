#pragma once
// One Redis connection with automatic pipelining: any thread may exec() a request; requests queued while a
// write is in flight leave together in the next write, and replies are matched in order (redis::pipeline).
// The connection keeps itself up: on any failure it fails the requests already written, reconnects with
// jittered exponential backoff, and sends the requests not yet written on the new connection. While it is
// down, exec() fails at once with error::not_connected, so callers never wait on an unreachable server; only
// until its first attempt to connect has ended, requests wait for it (within their timeout).

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/link_settings.hpp"
#include "core/tls_client.hpp"
#include "redis/credentials.hpp"
#include "redis/pipeline.hpp"

namespace sluice::redis {

using tls_config = core::tls_client_config;

// Redis behind sentinels: the address of the master is asked of them at every (re)connect.
struct sentinel_config {
  std::string master_name;
  std::vector<std::string> sentinels;  // host:port each
  std::string username;                // REDIS_SENTINEL_AUTH
  std::string password;
  std::shared_ptr<credential_file> auth_file;  // REDIS_SENTINEL_AUTH_FILE: in place of username and password
};

// The secret to AUTH with: the file's when there is one.
template <typename Config>
secret secret_of(const Config& c) {
  return c.auth_file ? c.auth_file->current() : secret{c.username, c.password};
}

// The link settings (REDIS_OP_TIMEOUT, REDIS_STARTUP_INITIAL_INTERVAL / _MAX_INTERVAL,
// REDIS_PIPELINE_WINDOW), and where and how to connect.
struct connection_config : core::link_settings {
  std::string address;  // "host:port" for TCP, a file path for a unix socket
  bool unix_socket = false;
  std::string username;  // empty: AUTH <password> (or no AUTH without a password)
  std::string password;
  // REDIS_AUTH_FILE: in place of username and password, read at every connection's AUTH.
  std::shared_ptr<credential_file> auth_file;
  std::chrono::milliseconds connect_timeout{10'000};
  std::size_t write_limit = 0;  // >0: at most this many requests per write
  tls_config tls;  // TCP only; the host part of `address` is the name checked against the certificate
  std::optional<sentinel_config> sentinel;  // set: `address` is unused, the sentinels name the master
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  using state_observer = std::function<void(bool connected)>;

  // Throws std::runtime_error naming the file when a TLS file cannot be loaded.
  connection(boost::asio::any_io_executor ex, connection_config config);
  ~connection();

  // Starts connecting (and reconnecting). `observer` hears every change of the connected state.
  void start(state_observer observer = {});
  // Fails every request with error::shutting_down and closes the socket; no reconnect afterwards.
  void stop();
  // Thread-safe. `request->done` is called exactly once, on this connection's strand.
  void exec(std::shared_ptr<pending_request> request);
  bool connected() const;
  // Connected, or still making its first connection (requests then wait for it).
  bool accepting() const;
  struct counts {
    std::uint64_t opened = 0;          // connections established
    std::uint64_t closed_locally = 0;  // closed by this side (stop, reconnect, READONLY, protocol error)
  };
  counts connection_counts() const;
  // Drops the current connection (if any); the next one starts afresh (behind sentinels: asks them again).
  void reconnect();
  // While waiting to retry after a failure: retry now (another connection to the same server just succeeded).
  void retry_now();
  // The last connection error, for logs and messages ("" while connected).
  std::string last_error() const;
  const connection_config& config() const { return config_; }

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
  connection_config config_;
};

}  // namespace sluice::redis
