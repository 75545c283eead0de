#pragma once
// Private to the Redis client: the state of one connection, shared by connection.cpp (the I/O loop) and
// connection_setup.cpp (connecting: sentinels, TCP/unix, TLS, AUTH/PING/ROLE). The I/O loops and the
// reconnecting are core::pipelined_link's.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "core/pipelined_link.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"
#include "redis/connection.hpp"
#include "redis/error.hpp"

namespace sluice::redis {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;

using core::use_tuple;

// Null without TLS; throws std::runtime_error naming the setting of a file that cannot be loaded.
std::shared_ptr<asio::ssl::context> make_tls_context(const tls_config& tls);

struct connection::impl : std::enable_shared_from_this<impl> {
  using link_type = core::pipelined_link<pipeline, error>;

  impl(asio::any_io_executor ex, const connection_config& config)
      : tls_context(make_tls_context(config.tls)),
        strand(asio::make_strand(ex)),
        config(config),
        link(strand, config) {}

  std::shared_ptr<asio::ssl::context> tls_context;  // null without TLS
  asio::strand<asio::any_io_executor> strand;
  connection_config config;
  link_type link;               // the socket, the pipeline, the I/O loops and the connection's state
  std::string current_address;  // config.address, or the master the sentinels named

  // link_type's protocol (core/pipelined_link.hpp).
  asio::awaitable<error_code> connect_once();
  std::string peer() const { return "Redis at " + current_address; }
  std::string malformed_reply() const { return "something that is not RESP"; }
  std::string_view next_write() { return link.requests.prepare_write(config.write_limit); }

  asio::awaitable<error_code> exchange(const request& r, std::vector<value>& replies,
                                       asio::steady_timer& timer);
  asio::awaitable<error_code> find_master(std::string& address, asio::steady_timer& timer);
  asio::awaitable<error_code> handshake(asio::steady_timer& timer);
  asio::awaitable<error_code> hello(std::vector<value>& replies, asio::steady_timer& timer);
  asio::awaitable<error_code> tls_handshake(asio::steady_timer& timer);
  void exec(std::shared_ptr<pending_request> request);
};

}  // namespace sluice::redis
