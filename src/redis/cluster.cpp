#include "redis/cluster.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"
#include "redis/cluster_slot.hpp"
#include "redis/error.hpp"

namespace sluice::redis {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr int max_redirects = 3;
constexpr auto refresh_interval = std::chrono::seconds(2);

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" → the address, or "" for any other reply.
std::string redirect_target(const value& reply, std::string_view kind) {
  if (!reply.is_error() || !std::string_view(reply.text).starts_with(kind)) return {};
  auto space = reply.text.rfind(' ');
  return space == std::string::npos ? std::string() : reply.text.substr(space + 1);
}

// The same commands, each preceded by ASKING. `payload` is one of our own requests: RESP arrays of bulk
// strings.
std::string with_asking(const std::string& payload) {
  class request asking;
  asking.push({"ASKING"});
  const std::string prefix = asking.release_payload();
  std::string out;
  std::string_view rest = payload;
  while (!rest.empty()) {
    value command;
    std::size_t consumed = 0;
    std::string problem;
    if (parse_reply(rest, consumed, command, problem) != parse_status::complete) break;
    out += prefix;
    out.append(rest.substr(0, consumed));
    rest.remove_prefix(consumed);
  }
  return out;
}

}  // namespace

struct cluster::state : std::enable_shared_from_this<state> {
  state(asio::any_io_executor e, connection_config b, std::vector<std::string> s, std::size_t n)
      : ex(std::move(e)), base(std::move(b)), seeds(std::move(s)), pool_size(n), timer(ex) {}

  asio::any_io_executor ex;
  connection_config base;
  std::vector<std::string> seeds;
  std::size_t pool_size;
  asio::steady_timer timer;
  observer on_change;
  mutable std::mutex mutex;
  std::map<std::string, std::unique_ptr<pool>> nodes;  // by "host:port"
  // Stopped pools of nodes that left the map while unreachable (a dead master whose replica took over): kept
  // until the cluster goes, as a request may still hold a pointer to one (it then fails as not connected).
  std::vector<std::unique_ptr<pool>> retired;
  std::array<pool*, cluster_slots> slots{};  // master of each slot; null until the map is known
  std::atomic<bool> have_map{false};
  std::string error;
  std::atomic<bool> refreshing{false};
  std::atomic<bool> stopping{false};

  pool& node_locked(const std::string& address);
  pool* any_up_locked() const;
  void refresh();
  void apply_map(const value& reply, const std::string& asked);
  // Takes out of `nodes` the pools that own no slot, are not seeds and are down; the caller stops them.
  std::vector<pool*> retire_unreachable_locked();
  void send(std::shared_ptr<pending_request> request, std::string key, pool* target, int redirects,
            bool asking);
  void changed() {
    if (on_change) on_change();
  }
  asio::awaitable<void> refresh_loop();
};

pool& cluster::state::node_locked(const std::string& address) {
  auto& slot = nodes[address];
  if (!slot) {
    auto config = base;
    config.address = address;
    config.unix_socket = false;
    slot = std::make_unique<pool>(ex, config, pool_size);
    std::weak_ptr<state> weak = shared_from_this();
    slot->start([weak] {
      if (auto self = weak.lock()) {
        self->changed();
        if (!self->have_map) self->refresh();
      }
    });
  }
  return *slot;
}

pool* cluster::state::any_up_locked() const {
  for (const auto& [_, p] : nodes) {
    if (p->up()) return p.get();
  }
  return nullptr;
}

// Asks one reachable node for CLUSTER SLOTS; at most one refresh in flight.
void cluster::state::refresh() {
  if (stopping || refreshing.exchange(true)) return;
  pool* target = nullptr;
  {
    std::lock_guard lock(mutex);
    target = any_up_locked();
  }
  if (target == nullptr) {
    refreshing = false;
    return;
  }
  auto request = std::make_shared<pending_request>();
  class request encoded;
  encoded.push({"CLUSTER", "SLOTS"});
  request->expected_replies = 1;
  request->payload = encoded.release_payload();
  const std::string asked = target->config().address;
  request->done = [self = shared_from_this(), asked](error_code ec, std::vector<value>&& replies) {
    if (!ec && !replies.empty()) self->apply_map(replies.front(), asked);
    self->refreshing = false;
  };
  target->exec(std::move(request));
}

// CLUSTER SLOTS: [[start, end, [host, port, id], replicas...], ...]; an empty host means the node asked.
void cluster::state::apply_map(const value& reply, const std::string& asked) {
  if (reply.type != value::kind::array) {
    std::lock_guard lock(mutex);
    error =
        core::cat("CLUSTER SLOTS from ", asked, " failed: ", reply.is_error() ? reply.text : "not a list");
    return;
  }
  bool changed_map = false;
  std::vector<pool*> gone;
  {
    std::lock_guard lock(mutex);
    std::array<pool*, cluster_slots> next{};
    for (const auto& range : reply.elements) {
      if (range.type != value::kind::array || range.elements.size() < 3) continue;
      const auto& master = range.elements[2];
      if (master.type != value::kind::array || master.elements.size() < 2) continue;
      std::string host = master.elements[0].text;
      if (host.empty() || host == "?") host = asked.substr(0, asked.rfind(':'));
      auto address = core::host_port(host, master.elements[1].integer);
      pool* p = &node_locked(address);
      auto first = static_cast<std::size_t>(std::max<std::int64_t>(range.elements[0].integer, 0));
      auto last =
          static_cast<std::size_t>(std::min<std::int64_t>(range.elements[1].integer, cluster_slots - 1));
      for (std::size_t s = first; s <= last; ++s) next[s] = p;
    }
    changed_map = !have_map || next != slots;
    slots = next;
    gone = retire_unreachable_locked();
    if (!have_map)
      core::log_info("Redis Cluster slot map loaded from ", asked, " (", nodes.size(), " nodes)");
    have_map = true;
    error.clear();
  }
  for (pool* p : gone) {
    core::log_warn("Redis Cluster: ", p->config().address,
                   " owns no slots and cannot be reached: its connections are closed");
    p->stop();
  }
  if (changed_map) changed();
}

std::vector<pool*> cluster::state::retire_unreachable_locked() {
  std::vector<pool*> gone;
  for (auto it = nodes.begin(); it != nodes.end();) {
    pool* p = it->second.get();
    bool seed = std::find(seeds.begin(), seeds.end(), it->first) != seeds.end();
    if (seed || p->up() || std::find(slots.begin(), slots.end(), p) != slots.end()) {
      ++it;
      continue;
    }
    gone.push_back(p);
    retired.push_back(std::move(it->second));
    it = nodes.erase(it);
  }
  return gone;
}

void cluster::state::send(std::shared_ptr<pending_request> request, std::string key, pool* target,
                          int redirects, bool asking) {
  auto inner = std::move(request->done);
  // Kept to resend on a redirection (rare): the original bytes, without ASKING.
  std::string payload = request->payload;
  std::size_t expected = request->expected_replies;
  if (asking) {
    // Redis forgets ASKING after one command: every command of the request needs its own.
    request->payload = with_asking(request->payload);
    request->expected_replies *= 2;
  }
  request->done = [self = shared_from_this(), inner = std::move(inner), payload = std::move(payload),
                   expected, key = std::move(key), redirects,
                   asking](error_code ec, std::vector<value>&& replies) mutable {
    if (asking && !ec) {  // drop ASKING's +OK before each reply
      std::vector<value> kept;
      for (std::size_t i = 1; i < replies.size(); i += 2) kept.push_back(std::move(replies[i]));
      replies = std::move(kept);
    }
    if (!ec && !replies.empty() && redirects < max_redirects) {
      auto moved = redirect_target(replies.front(), "MOVED ");
      auto ask = moved.empty() ? redirect_target(replies.front(), "ASK ") : std::string();
      if (!moved.empty() || !ask.empty()) {
        pool* next = nullptr;
        {
          std::lock_guard lock(self->mutex);
          next = &self->node_locked(moved.empty() ? ask : moved);
          if (!moved.empty()) self->slots[hash_slot(key)] = next;
        }
        if (!moved.empty()) self->refresh();
        auto again = std::make_shared<pending_request>();
        again->payload = std::move(payload);
        again->expected_replies = expected;
        again->done = std::move(inner);
        self->send(std::move(again), std::move(key), next, redirects + 1, !ask.empty());
        return;
      }
    }
    inner(ec, std::move(replies));
  };
  target->exec(std::move(request));
}

asio::awaitable<void> cluster::state::refresh_loop() {
  auto self = shared_from_this();
  while (!stopping) {
    timer.expires_after(refresh_interval);
    auto [ec] = co_await timer.async_wait(core::use_tuple);
    if (ec || stopping) co_return;
    refresh();
  }
}

cluster::cluster(asio::any_io_executor ex, connection_config base, std::vector<std::string> seeds,
                 std::size_t pool_size)
    : state_(std::make_shared<state>(std::move(ex), std::move(base), std::move(seeds), pool_size)) {}

cluster::~cluster() {
  stop();
}

void cluster::start(observer on_change) {
  state_->on_change = std::move(on_change);
  {
    std::lock_guard lock(state_->mutex);
    for (const auto& seed : state_->seeds) state_->node_locked(seed);
  }
  asio::co_spawn(
      state_->timer.get_executor(), [self = state_] { return self->refresh_loop(); }, asio::detached);
}

void cluster::stop() {
  if (state_->stopping.exchange(true)) return;
  state_->timer.cancel();
  std::lock_guard lock(state_->mutex);
  for (auto& [_, p] : state_->nodes) p->stop();
}

void cluster::exec(std::shared_ptr<pending_request> request, std::string_view key) {
  pool* target = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->have_map) {
      target = state_->slots[hash_slot(key)];
    } else {
      // Before the slot map: a seed still connecting, or up, takes it; its MOVED names the owner.
      for (const auto& seed : state_->seeds) {
        auto it = state_->nodes.find(seed);
        if (it != state_->nodes.end() && it->second->accepting()) {
          target = it->second.get();
          break;
        }
      }
    }
  }
  if (target == nullptr) {
    if (auto done = std::move(request->done)) {
      request->done = nullptr;
      done(error::not_connected, {});
    }
    return;
  }
  state_->send(std::move(request), std::string(key), target, 0, false);
}

bool cluster::up() const {
  std::lock_guard lock(state_->mutex);
  return state_->have_map && state_->any_up_locked() != nullptr;
}

std::string cluster::describe(error_code ec) const {
  if (ec == error::not_connected) {
    if (state_->have_map) return "Redis Cluster: the node that owns this key is not connected";
    return core::cat("Redis Cluster is unavailable: ", last_error());
  }
  return core::cat("Redis Cluster: ", ec.message());
}

connection_stats cluster::stats() const {
  std::lock_guard lock(state_->mutex);
  connection_stats total;
  for (const auto& [_, p] : state_->nodes) {
    const auto s = p->stats();
    total.active += s.active;
    total.opened += s.opened;
    total.closed_locally += s.closed_locally;
  }
  return total;
}

std::string cluster::last_error() const {
  std::lock_guard lock(state_->mutex);
  if (!state_->have_map) {
    for (const auto& [_, p] : state_->nodes) {
      if (auto e = p->last_error(); !e.empty()) return e;
    }
    return state_->error.empty() ? std::string("the slot map is not known yet") : state_->error;
  }
  return state_->error;
}

}  // namespace sluice::redis
