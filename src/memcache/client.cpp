#include "memcache/client.hpp"

#include <zlib.h>
#include <algorithm>

#include "memcache/error.hpp"

namespace sluice::memcache {

std::size_t pick_server(std::string_view key, std::size_t count) {
  if (count <= 1) return 0;
  // gomemcache copies the key into a 256-byte buffer first: only that much of it counts.
  const auto n = static_cast<uInt>(std::min<std::size_t>(key.size(), 256));
  const auto crc = crc32(0L, reinterpret_cast<const Bytef*>(key.data()), n);
  return static_cast<std::uint32_t>(crc) % static_cast<std::uint32_t>(count);
}

client::client(boost::asio::any_io_executor ex, client_config config)
    : ex_(std::move(ex)), config_(std::move(config)) {
  for (const auto& address : config_.servers) nodes_.push_back(make_node(address));
}

client::~client() {
  stop();
}

client::node client::make_node(const std::string& address) const {
  node n{address, {}, 0};
  for (std::size_t i = 0; i < std::max<std::size_t>(config_.connections_per_node, 1); ++i) {
    auto c = config_.connection;
    c.address = address;
    c.log_state_changes = i == 0;  // a node's connections share a fate: one report is enough
    n.connections.push_back(std::make_shared<connection>(ex_, std::move(c)));
  }
  return n;
}

void client::start() {
  started_ = true;
  for (auto& n : nodes_)
    for (auto& c : n.connections) c->start();
}

void client::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  for (auto& n : nodes_)
    for (auto& c : n.connections) c->stop();
}

void client::set_servers(std::vector<std::string> servers) {
  std::lock_guard lock(mutex_);  // nodes move between the lists: readers on other threads wait
  if (stopped_) return;
  std::vector<node> next;
  for (const auto& address : servers) {
    auto kept =
        std::find_if(nodes_.begin(), nodes_.end(), [&](const node& n) { return n.address == address; });
    if (kept != nodes_.end() && !kept->connections.empty()) {
      next.push_back(std::move(*kept));
    } else {
      next.push_back(make_node(address));
      if (started_)
        for (auto& c : next.back().connections) c->start();
    }
  }
  // A node that left: what waits on it fails (as when it goes down), new requests go to the new list.
  for (auto& n : nodes_)
    for (auto& c : n.connections) c->stop();
  nodes_ = std::move(next);
}

void client::exec(std::size_t index, std::shared_ptr<pending_request> request) {
  if (index >= nodes_.size()) {
    return pipeline::finish(*request, error::no_servers, {});
  }
  auto& n = nodes_[index];
  const std::size_t count = n.connections.size();
  const std::size_t turn = n.commands / commands_per_turn;
  n.commands += replies_wanted(*request);  // the get-multi too: a get alone still takes its share of a turn
  for (std::size_t i = 0; i < count; ++i) {
    auto& c = n.connections[(turn + i) % count];
    if (c->accepting()) return c->exec(std::move(request));
  }
  pipeline::finish(*request, error::not_connected, {});
}

std::string client::last_error() const {
  std::lock_guard lock(mutex_);
  for (const auto& n : nodes_) {
    if (std::none_of(n.connections.begin(), n.connections.end(),
                     [](const auto& c) { return c->connected(); })) {
      auto e = n.connections.front()->last_error();
      return e.empty() ? "not connected to memcached at " + n.address + " yet" : e;
    }
  }
  return {};
}

}  // namespace sluice::memcache
