#include "ratelimit/backends/redis/script_batcher.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/gcra_command.hpp"
#include "redis/cluster_slot.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

void script_batcher::add(const script_group& group, std::string_view routing_key, done_fn done) {
  const std::uint32_t slot = store_.one_key_per_request() ? rd::hash_slot(routing_key) : 0;
  bool post = false;
  {
    std::lock_guard lock(mutex_);
    auto& c = calls_[slot];
    if (!c) c = std::make_shared<call>(call{std::string(routing_key), {}});
    c->entries.push_back({group, std::move(done)});
    post = !flush_posted_;
    flush_posted_ = true;
  }
  if (post) boost::asio::post(ex_, [this] { flush(); });
}

void script_batcher::flush() {
  std::unordered_map<std::uint32_t, std::shared_ptr<call>> calls;
  {
    std::lock_guard lock(mutex_);
    calls.swap(calls_);
    flush_posted_ = false;
  }
  for (auto& [_, c] : calls) send(std::move(c), false);
}

void script_batcher::send(std::shared_ptr<call> c, bool whole) {
  // How many ops of the call touch each key: a key touched once needs no script (a call sent whole, after
  // NOSCRIPT, holds only groups that go through it).
  std::unordered_map<std::string_view, std::size_t> uses;
  for (const auto& e : c->entries) {
    for (auto i : whole ? std::span<const std::size_t>() : e.group.indexes) {
      ++uses[e.group.ops[i].key];
      if (e.group.ops[i].kind == limiter::op_kind::sliding) ++uses[e.group.ops[i].previous_key];
    }
  }
  // On a cluster a BITFIELD goes alone: a request whose first key is being migrated is sent again whole to
  // the importing node (cluster.cpp), which must not repeat what the commands of other keys did.
  const bool cluster = store_.one_key_per_request();
  auto alone = [&](const script_group& g) {
    return !whole && g.mode == limiter::batch_mode::independent && (!cluster || g.indexes.size() == 1) &&
           std::ranges::all_of(g.indexes, [&](std::size_t i) {
             return g.ops[i].kind == limiter::op_kind::gcra && uses[g.ops[i].key] == 1;
           });
  };
  // The BITFIELDs go first, in entry order, then the script's one call.
  rd::request encoded;
  std::vector<route> routes(c->entries.size(), route::script);
  std::vector<script_group> groups;
  groups.reserve(c->entries.size());
  for (std::size_t k = 0; k < c->entries.size(); ++k) {
    const auto& g = c->entries[k].group;
    if (!alone(g)) {
      groups.push_back(g);
    } else if (cluster) {
      routes[k] = route::own_request;
      send_gcra(c, k);
    } else {
      routes[k] = route::with_script;
      for (auto i : g.indexes) push_gcra(encoded, g.ops[i]);
    }
  }
  if (encoded.expected_replies() == 0 && groups.empty()) return;
  if (!groups.empty()) push_decide(encoded, groups, whole);
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, c, whole, routes = std::move(routes), scripted = !groups.empty()](
                      boost::system::error_code ec, std::vector<rd::value>&& replies) {
    std::string error, script_error;
    if (ec) error = store_.describe(ec);
    const rd::value* script = ec || !scripted ? nullptr : &replies.back();
    // The node lost its scripts (a restart, SCRIPT FLUSH): the script's groups go again with the script
    // itself.
    std::shared_ptr<call> again;
    if (script != nullptr && script->is_error()) {
      if (!whole && script->text.starts_with("NOSCRIPT")) {
        again = std::make_shared<call>(call{c->routing_key, {}});
      } else {
        script_error = core::cat("Redis error: ", script->text);
      }
    }
    std::size_t next = 0, at = 0;
    for (std::size_t k = 0; k < c->entries.size(); ++k) {
      auto& e = c->entries[k];
      // Read first: `done` may finish the decision that owns the group's ops.
      if (routes[k] == route::with_script) {
        const std::size_t count = 2 * e.group.indexes.size();
        const std::span<const rd::value> mine =
            ec ? std::span<const rd::value>() : std::span<const rd::value>(replies).subspan(next, count);
        next += count;
        e.done(ec ? &error : nullptr, answer{nullptr, 0, mine});
      } else if (routes[k] == route::own_request) {
        continue;
      } else if (again) {
        again->entries.push_back(std::move(e));
      } else {
        const std::size_t size = decide_reply_size(e.group.ops, e.group.indexes);
        const std::string* failed = ec ? &error : !script_error.empty() ? &script_error : nullptr;
        e.done(failed, answer{failed == nullptr ? script : nullptr, at, {}});
        at += size;
      }
    }
    if (again) send(std::move(again), true);
  };
  store_.exec(std::move(request), c->routing_key);
}

void script_batcher::send_gcra(std::shared_ptr<call> c, std::size_t k) {
  const auto& g = c->entries[k].group;
  rd::request encoded;
  push_gcra(encoded, g.ops[g.indexes.front()]);
  const std::string_view key = g.ops[g.indexes.front()].key;
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, c, k](boost::system::error_code ec, std::vector<rd::value>&& replies) {
    const std::string error = ec ? store_.describe(ec) : std::string();
    c->entries[k].done(ec ? &error : nullptr, answer{nullptr, 0, replies});
  };
  store_.exec(std::move(request), key);
}

}  // namespace sluice::ratelimit::backends::redis
