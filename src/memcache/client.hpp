#pragma once
// One worker's memcached client: the node list (MEMCACHE_HOST_PORT, or the targets of MEMCACHE_SRV), a few
// pipelined connections to each node, and which node holds a key — gomemcache's choice (CRC-32 of the key
// modulo the number of nodes, in list order), so Sluice and envoyproxy/ratelimit instances given the same
// list agree on where every counter lives. Lives on one worker's io_context.

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "memcache/connection.hpp"

namespace sluice::memcache {

// gomemcache's ServerList.PickServer: the index of the node that holds `key` among `count` nodes.
std::size_t pick_server(std::string_view key, std::size_t count);

struct client_config {
  std::vector<std::string> servers;  // host:port, in order
  std::size_t connections_per_node = 1;
  connection_config connection;  // for every node; its address is each node's
};

class client {
 public:
  client(boost::asio::any_io_executor ex, client_config config);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  void start();
  // Any thread.
  void stop();
  // On the executor's thread: a new node list (an SRV refresh). Connections to nodes that stay are kept.
  void set_servers(std::vector<std::string> servers);

  // On the executor's thread.
  std::size_t node_count() const { return nodes_.size(); }
  std::size_t pick(std::string_view key) const { return pick_server(key, nodes_.size()); }
  // As redis::pool: a node's connections take turns by this many commands, not request by request, so the
  // decisions of one loop pass share one write and one read.
  static constexpr std::size_t commands_per_turn = 256;
  const std::string& address(std::size_t node) const { return nodes_[node].address; }
  // Sends `request` to node `node` over one of its live connections; fails it inline with
  // error::not_connected when none is up.
  void exec(std::size_t node, std::shared_ptr<pending_request> request);

  // Any thread: what went wrong with a node that is down ("" when every node is up).
  std::string last_error() const;

 private:
  struct node {
    std::string address;
    std::vector<std::shared_ptr<connection>> connections;
    std::size_t commands = 0;  // sent so far: which connection's turn it is
  };
  node make_node(const std::string& address) const;

  boost::asio::any_io_executor ex_;
  client_config config_;
  std::vector<node> nodes_;   // written on the executor's thread, under mutex_
  mutable std::mutex mutex_;  // for readers on other threads
  bool started_ = false;
  bool stopped_ = false;  // under mutex_: a list that arrives after stop() is not connected to
};

}  // namespace sluice::memcache
