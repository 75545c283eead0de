#include "ratelimit/backends/redis/redis_backend.hpp"

#include <boost/container/small_vector.hpp>
#include <charconv>
#include <mutex>
#include <optional>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/decide_script.hpp"
#include "ratelimit/limiter/pending_operations.hpp"
#include "redis/cluster_slot.hpp"
#include "redis/error.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

using index_list = boost::container::small_vector<std::size_t, 4>;

// Negative hits in one atomic step: nothing to give back to an absent key, never below 0, the TTL kept
// (DECRBY does not touch it). The numbers stay strings (canonical decimals, so the longer one is larger):
// Lua's doubles round above 2^53, and Redis 7.2.0-7.2.4 hand some of them to DECRBY as "1e+08". Sent with
// EVAL: refunds are rare, and Redis caches the compiled script.
constexpr std::string_view refund_script =
    "local c = redis.call('GET', KEYS[1]) "
    "if not c then return 0 end "
    "local a = ARGV[1] "
    "if #a > #c or (#a == #c and a >= c) then a = c end "
    "return redis.call('DECRBY', KEYS[1], a)";

std::string_view to_text(char (&buf)[24], std::uint64_t v) {
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return {buf, static_cast<std::size_t>(end - buf)};
}

// Reads INCRBY's integer, or GET's bulk string (nil = 0).
std::optional<std::uint64_t> counter_value(const rd::value& v) {
  if (v.type == rd::value::kind::integer && v.integer >= 0) return static_cast<std::uint64_t>(v.integer);
  if (v.type == rd::value::kind::null) return 0;
  if (v.type == rd::value::kind::bulk_string) {
    std::uint64_t out = 0;
    auto [ptr, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), out);
    if (ec == std::errc{} && ptr == v.text.data() + v.text.size()) return out;
  }
  return std::nullopt;
}

bool is_noscript(const rd::value& v) {
  return v.is_error() && v.text.starts_with("NOSCRIPT");
}

}  // namespace

// What one decision waits for: its requests (one per store, or per key or slot on a cluster), finished in any
// order, on any thread. It is its requests' completion: when the last one is in, an all-or-nothing batch
// split over several requests may still have to take back what some of them applied.
struct batch final : limiter::completion {
  enum class command : std::uint8_t { get, each, together };

  struct part {
    rd::store* store;
    index_list indexes;  // which ops it carries, in reply order
    command what;
    bool whole = false;   // scripts sent with EVAL (after NOSCRIPT)
    bool applied = true;  // a `together` part: whether its script applied its ops
  };

  batch(limiter::completion& d, std::span<const limiter::counter_op> o, std::span<limiter::op_result> r,
        limiter::batch_mode m)
      : pending(*this), done(d), ops(o), results(r), mode(m) {}

  limiter::pending_operations pending;
  limiter::completion& done;
  std::span<const limiter::counter_op> ops;
  std::span<limiter::op_result> results;
  limiter::batch_mode mode;
  // Reserved before the first send (a part adds at most one more, for NOSCRIPT), so adding one never moves
  // the parts that other threads' replies are reading; the mutex orders the additions.
  boost::container::small_vector<part, 4> parts;
  std::mutex parts_mutex;
  // Compensation: the ops that take back what applied parts counted.
  boost::container::small_vector<limiter::counter_op, 4> undo_ops;
  bool compensating = false;

  void send(std::size_t which);
  void on_replies(std::size_t which, boost::system::error_code ec, const std::vector<rd::value>& replies);
  void complete(const limiter::backend_error* error) noexcept override;
  // Sends every part. One count more is held while sending: a store may complete inline (nothing reachable),
  // and the last completion may delete the batch.
  void send_all() {
    const std::size_t count = parts.size();
    pending.add(count + 1);
    for (std::size_t which = 0; which < count; ++which) send(which);
    pending.finish_one();
  }
};

void batch::send(std::size_t which) {
  auto& p = parts[which];
  rd::request encoded;
  char a[24], b[24];
  const auto all = compensating ? std::span<const limiter::counter_op>(undo_ops) : ops;
  if (p.what == command::together) {
    push_decide(encoded, all, p.indexes, compensating ? limiter::batch_mode::independent : mode, p.whole);
  } else {
    for (auto i : p.indexes) {
      const auto& op = all[i];
      if (p.what == command::get) {
        encoded.push({"GET", op.key});
      } else if (op.kind != limiter::op_kind::count) {
        const std::size_t one[1] = {i};
        push_decide(encoded, all, one, limiter::batch_mode::independent, p.whole);
      } else {
        if (op.refund) {
          encoded.push({"EVAL", refund_script, "1", op.key, to_text(a, op.increment)});
        } else {
          encoded.push({"INCRBY", op.key, to_text(a, op.increment)});
          encoded.push({"EXPIRE", op.key, to_text(b, op.ttl_seconds)});
        }
      }
    }
  }
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, which](boost::system::error_code ec, std::vector<rd::value>&& replies) {
    on_replies(which, ec, replies);
    pending.finish_one();
  };
  // The routing key is read before sending: the last completion may delete the batch.
  const std::string_view key = all[p.indexes.front()].key;
  p.store->exec(std::move(request), key);
}

void batch::on_replies(std::size_t which, boost::system::error_code ec,
                       const std::vector<rd::value>& replies) {
  auto& p = parts[which];
  if (ec) return pending.fail(p.store->describe(ec));
  if (compensating) return;  // what was taken back changes no decision
  if (p.what == command::together) {
    if (is_noscript(replies[0]) && !p.whole) {
      p.whole = true;  // the node lost its scripts (a restart, SCRIPT FLUSH): send the script itself
      pending.add();
      return send(which);
    }
    auto applied = read_decide_reply(replies[0], p.indexes, results);
    if (!applied) return pending.fail(core::cat("Redis error: ", replies[0].text));
    p.applied = *applied;
    return;
  }
  index_list again;  // script ops whose node had no script
  std::size_t next = 0;
  for (auto index : p.indexes) {
    const auto& op = ops[index];
    const auto& reply = replies[next++];
    if (p.what != command::get && op.kind != limiter::op_kind::count) {
      const std::size_t one[1] = {index};
      if (is_noscript(reply) && !p.whole) {
        again.push_back(index);
      } else if (!read_decide_reply(reply, one, results)) {
        return pending.fail(core::cat("Redis error: ", reply.text));
      }
      continue;
    }
    if (reply.is_error()) return pending.fail(core::cat("Redis error: ", reply.text));
    // INCRBY's reply is followed by EXPIRE's. A counter without its EXPIRE would never go away: that is a
    // failure too.
    if (p.what == command::each && !op.refund && replies[next++].is_error()) {
      return pending.fail(core::cat("Redis error: ", replies[next - 1].text));
    }
    auto v = counter_value(reply);
    if (!v) return pending.fail("Redis returned a value that is not a counter");
    results[index].value = *v;
  }
  if (!again.empty()) {
    std::size_t added = 0;
    {
      std::lock_guard lock(parts_mutex);
      parts.push_back({p.store, {}, command::each, true});
      parts.back().indexes.assign(again.begin(), again.end());
      added = parts.size() - 1;
    }
    pending.add();
    send(added);
  }
}

void batch::complete(const limiter::backend_error* error) noexcept {
  // An all-or-nothing batch over several nodes (a cluster's slots, or the per-second store) is atomic on
  // each: when some applied and some refused, the hits of those that applied are taken back.
  const bool split = mode == limiter::batch_mode::all_or_nothing && parts.size() > 1;
  const bool refused = std::ranges::any_of(parts, [](const part& p) { return !p.applied; });
  if (error == nullptr && split && refused && !compensating) {
    compensating = true;
    boost::container::small_vector<part, 4> undo;
    for (const auto& p : parts) {
      if (!p.applied) continue;
      part u{p.store, {}, command::together};
      for (auto i : p.indexes) {
        auto op = ops[i];
        if (!op.refund) {
          op.refund = true;
        } else if (op.kind != limiter::op_kind::gcra && results[i].before > results[i].value) {
          // What a refund gave back is counted again, as a plain counter increment.
          op = {};
          op.key = ops[i].key;
          op.increment = results[i].before - results[i].value;
          op.ttl_seconds = ops[i].ttl_seconds;
          op.now_us = ops[i].now_us;
        } else {
          continue;  // a GCRA arrival time moved back stays moved back
        }
        u.indexes.push_back(undo_ops.size());
        undo_ops.push_back(op);
      }
      if (!u.indexes.empty()) undo.push_back(std::move(u));
    }
    if (!undo.empty()) {
      parts = std::move(undo);
      parts.reserve(2 * parts.size());
      send_all();
      return;
    }
  }
  // A failed compensation changes no decision: the request was refused either way.
  done.complete(compensating ? nullptr : error);
  delete this;
}

void redis_backend::increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                              limiter::completion& done, limiter::batch_mode mode) {
  run(mode == limiter::batch_mode::independent ? 1 : 2, ops, results, done, mode);
}

void redis_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                        limiter::completion& done) {
  run(0, ops, results, done, limiter::batch_mode::independent);
}

void redis_backend::run(int what, std::span<const limiter::counter_op> ops,
                        std::span<limiter::op_result> results, limiter::completion& done,
                        limiter::batch_mode mode) {
  if (ops.empty()) return done.complete(nullptr);
  auto* state = new batch(done, ops, results, mode);
  const auto command = static_cast<batch::command>(what);
  // Group the ops: per store; on a cluster, per key (each op alone) or, for a script, per slot.
  boost::container::small_vector<std::pair<rd::store*, std::size_t>, 2> groups;  // (store, slot or SIZE_MAX)
  for (std::size_t i = 0; i < ops.size(); ++i) {
    rd::store* store = ops[i].per_second && per_second_ != nullptr ? per_second_ : &main_;
    std::size_t group = SIZE_MAX;
    if (store->one_key_per_request()) {
      group = command == batch::command::together ? rd::hash_slot(ops[i].key) : SIZE_MAX - 1 - i;
    }
    auto it = std::ranges::find(groups, std::pair{store, group});
    if (it == groups.end()) {
      groups.emplace_back(store, group);
      state->parts.push_back({store, {}, command});
      it = groups.end() - 1;
    }
    state->parts[static_cast<std::size_t>(it - groups.begin())].indexes.push_back(i);
  }
  state->parts.reserve(2 * state->parts.size());
  state->send_all();
}

limiter::trace_description redis_backend::describe_for_trace(std::span<const limiter::counter_op> ops) const {
  std::int64_t main = 0, per_second = 0;
  for (const auto& op : ops) ++(op.per_second && per_second_ != nullptr ? per_second : main);
  return {"Redis Pipeline Execution",
          {{{"pipeline length", 2 * main}, {"perSecondPipeline length", 2 * per_second}}},
          2};
}

}  // namespace sluice::ratelimit::backends::redis
