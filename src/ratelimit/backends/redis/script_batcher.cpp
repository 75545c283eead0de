#include "ratelimit/backends/redis/script_batcher.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <utility>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/gcra_command.hpp"
#include "redis/cluster_slot.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

void script_batcher::add(const script_group& group, std::string_view routing_key, done_fn done) {
  const std::uint32_t slot = store_.one_key_per_request() ? rd::hash_slot(routing_key) : 0;
  auto& c = calls_[slot];
  if (!c) c = std::make_shared<call>(call{std::string(routing_key), {}});
  c->entries.push_back({group, std::move(done)});
  if (!std::exchange(flush_posted_, true)) boost::asio::post(ex_, [this] { flush(); });
}

void script_batcher::flush() {
  auto calls = std::exchange(calls_, {});
  flush_posted_ = false;
  for (auto& [_, c] : calls) send(std::move(c), false);
}

// A key touched once needs no script (a call sent whole, after NOSCRIPT, holds only groups that go through
// it).
std::unordered_map<std::string_view, std::size_t> script_batcher::key_uses(const call& c, bool whole) {
  std::unordered_map<std::string_view, std::size_t> uses;
  for (const auto& e : c.entries) {
    for (auto i : whole ? std::span<const std::size_t>() : e.group.indexes) {
      ++uses[e.group.ops[i].key];
      if (const auto* sliding = e.group.ops[i].as<limiter::sliding_window_op>())
        ++uses[sliding->previous_key];
    }
  }
  return uses;
}

void script_batcher::send(std::shared_ptr<call> c, bool whole) {
  rd::request encoded;
  auto sent = encode(c, whole, encoded);
  if (sent.bitfields == 0 && !sent.scripted) return;
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, c, whole, sent = std::move(sent)](boost::system::error_code ec,
                                                           std::vector<rd::value>&& replies) {
    answered(c, whole, sent, ec, replies);
  };
  store_.exec(std::move(request), c->routing_key);
}

script_batcher::layout script_batcher::encode(const std::shared_ptr<call>& c, bool whole, rd::request& out) {
  auto uses = key_uses(*c, whole);
  // On a cluster a BITFIELD goes alone: a request whose first key is being migrated is sent again whole to
  // the importing node (cluster.cpp), which must not repeat what the commands of other keys did.
  const bool cluster = store_.one_key_per_request();
  auto alone = [&](const script_group& g) {
    return !whole && g.mode == limiter::batch_mode::independent && (!cluster || g.indexes.size() == 1) &&
           std::ranges::all_of(g.indexes, [&](std::size_t i) {
             // Usage may leave an arrival time past its tolerance, which only the script's TTL covers.
             return g.ops[i].kind() == limiter::op_kind::gcra && !g.ops[i].usage && uses[g.ops[i].key] == 1;
           });
  };
  layout sent{std::vector<route>(c->entries.size(), route::script),
              std::vector<std::size_t>(c->entries.size(), 0),
              0,
              false,
              {}};
  std::vector<const limiter::counter_op*> expire;
  std::vector<script_group> groups;
  groups.reserve(c->entries.size());
  for (std::size_t k = 0; k < c->entries.size(); ++k) {
    const auto& g = c->entries[k].group;
    if (!alone(g)) {
      groups.push_back(g);
    } else if (cluster) {
      sent.routes[k] = route::own_request;
      send_gcra(c, k);
    } else {
      sent.routes[k] = route::with_script;
      for (auto i : g.indexes) {
        push_gcra(out, g.ops[i]);
        const std::uint64_t key_hash = gcra_expiry::hash(g.ops[i].key);
        if (expiry_.due(key_hash, g.ops[i].now_us,
                        std::get<limiter::gcra_op>(g.ops[i].algorithm).tolerance_us)) {
          expire.push_back(&g.ops[i]);
          sent.pexpire_keys.push_back(key_hash);
          ++sent.expiring[k];
        }
      }
    }
  }
  sent.bitfields = out.expected_replies();
  sent.scripted = !groups.empty();
  if (sent.bitfields == 0 && !sent.scripted) return sent;
  if (sent.scripted) push_decide(out, groups, whole);
  for (const auto* op : expire) push_gcra_expiry(out, *op);
  return sent;
}

void script_batcher::answered(const std::shared_ptr<call>& c, bool whole, const layout& sent,
                              boost::system::error_code ec, std::vector<rd::value>& replies) {
  const std::size_t bitfields = sent.bitfields;
  const bool scripted = sent.scripted;
  if (ec || std::ranges::any_of(std::span(replies).subspan(std::min(replies.size(), bitfields + scripted)),
                                [](const rd::value& v) { return v.is_error(); }))
    forget(sent.pexpire_keys);
  std::string error, script_error;
  if (ec) error = store_.describe(ec);
  const rd::value* script = ec || !scripted ? nullptr : &replies[bitfields];
  // The node lost its scripts (a restart, SCRIPT FLUSH): the script's groups go again with the script itself.
  std::shared_ptr<call> again;
  if (script != nullptr && script->is_error()) {
    if (!whole && script->text.starts_with("NOSCRIPT")) {
      again = std::make_shared<call>(call{c->routing_key, {}});
    } else {
      script_error = core::cat("Redis error: ", script->text);
    }
  }
  std::size_t next = 0, at = 0, next_expire = bitfields + (scripted ? 1 : 0);
  for (std::size_t k = 0; k < c->entries.size(); ++k) {
    auto& e = c->entries[k];
    // Read first: `done` may finish the decision that owns the group's ops.
    if (sent.routes[k] == route::with_script) {
      const std::size_t count = e.group.indexes.size();
      const std::span<const rd::value> mine =
          ec ? std::span<const rd::value>() : std::span<const rd::value>(replies).subspan(next, count);
      next += count;
      // A key without its expiry would never go away: a failed PEXPIRE fails the group too.
      std::string expire_error;
      for (std::size_t x = 0; !ec && x < sent.expiring[k]; ++x, ++next_expire) {
        if (replies[next_expire].is_error() && expire_error.empty())
          expire_error = core::cat("Redis error: ", replies[next_expire].text);
      }
      const std::string* failed = ec ? &error : !expire_error.empty() ? &expire_error : nullptr;
      e.done(failed, answer{nullptr, 0, failed == nullptr ? mine : std::span<const rd::value>()});
    } else if (sent.routes[k] == route::own_request) {
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
}

void script_batcher::forget(std::vector<std::uint64_t> key_hashes) {
  if (key_hashes.empty()) return;
  boost::asio::post(ex_, [this, key_hashes = std::move(key_hashes)] {
    for (auto h : key_hashes) expiry_.forget(h);
  });
}

void script_batcher::send_gcra(std::shared_ptr<call> c, std::size_t k) {
  const auto& g = c->entries[k].group;
  const auto& op = g.ops[g.indexes.front()];
  rd::request encoded;
  push_gcra(encoded, op);
  const std::uint64_t key_hash = gcra_expiry::hash(op.key);
  const bool expires =
      expiry_.due(key_hash, op.now_us, std::get<limiter::gcra_op>(op.algorithm).tolerance_us);
  if (expires) push_gcra_expiry(encoded, op);
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, c, k, expires, key_hash](boost::system::error_code ec,
                                                  std::vector<rd::value>&& replies) {
    std::string error = ec ? store_.describe(ec) : std::string();
    if (!ec && replies.size() > 1 && replies[1].is_error())
      error = core::cat("Redis error: ", replies[1].text);
    const bool failed = !error.empty();
    if (failed && expires) forget({key_hash});
    c->entries[k].done(
        failed ? &error : nullptr,
        answer{nullptr, 0, failed ? std::span<const rd::value>() : std::span(replies).first(1)});
  };
  store_.exec(std::move(request), op.key);
}

}  // namespace sluice::ratelimit::backends::redis
