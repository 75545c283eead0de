#include "ratelimit/backends/redis/script_batcher.hpp"

#include <boost/asio/post.hpp>

#include "core/strings.hpp"
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
  std::vector<script_group> groups;
  groups.reserve(c->entries.size());
  for (const auto& e : c->entries) groups.push_back(e.group);
  rd::request encoded;
  push_decide(encoded, groups, whole);
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, c, whole](boost::system::error_code ec, std::vector<rd::value>&& replies) {
    std::string error;
    if (ec) {
      error = store_.describe(ec);
    } else if (const auto& reply = replies.front(); reply.is_error()) {
      // The node lost its scripts (a restart, SCRIPT FLUSH): the script itself goes, and loads it again.
      if (!whole && reply.text.starts_with("NOSCRIPT")) return send(c, true);
      error = core::cat("Redis error: ", reply.text);
    }
    std::size_t at = 0;
    for (auto& e : c->entries) {
      // Read first: `done` may finish the decision that owns the group's ops.
      const std::size_t size = decide_reply_size(e.group.ops, e.group.indexes);
      e.done(error.empty() ? nullptr : &error, error.empty() ? &replies.front() : nullptr, at);
      at += size;
    }
  };
  store_.exec(std::move(request), c->routing_key);
}

}  // namespace sluice::ratelimit::backends::redis
