#include "ratelimit/backends/redis/redis_backend.hpp"

#include <boost/container/small_vector.hpp>
#include <charconv>
#include <optional>

#include "core/strings.hpp"
#include "ratelimit/limiter/pending_operations.hpp"
#include "redis/error.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

// What one decision waits for: its requests (one per store, or one per key on a cluster), finished in any
// order, on any thread.
struct batch {
  batch(limiter::completion& d, std::span<const limiter::counter_op> o, std::span<std::uint64_t> r, bool incr)
      : pending(d), ops(o), results(r), increment(incr) {}

  struct part {
    rd::store* store;
    boost::container::small_vector<std::size_t, 4> indexes;  // which ops it answers, in reply order
  };

  limiter::pending_operations pending;
  std::span<const limiter::counter_op> ops;
  std::span<std::uint64_t> results;
  bool increment;
  boost::container::small_vector<part, 2> parts;

  void fail(std::string message) { pending.fail(std::move(message)); }
  void on_replies(std::size_t which, boost::system::error_code ec, const std::vector<rd::value>& replies);
  void finish_one() {
    if (pending.finish_one()) delete this;
  }
};

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

}  // namespace

void batch::on_replies(std::size_t which, boost::system::error_code ec,
                       const std::vector<rd::value>& replies) {
  const auto& p = parts[which];
  if (ec) return fail(p.store->describe(ec));
  std::size_t next = 0;
  for (auto index : p.indexes) {
    const auto& reply = replies[next++];
    if (reply.is_error()) return fail(core::cat("Redis error: ", reply.text));
    // INCRBY's reply is followed by EXPIRE's. A counter without its EXPIRE would never go away: that is a
    // failure too.
    if (increment && !ops[index].refund && replies[next++].is_error()) {
      return fail(core::cat("Redis error: ", replies[next - 1].text));
    }
    auto v = counter_value(reply);
    if (!v) return fail("Redis returned a value that is not a counter");
    results[index] = *v;
  }
}

void redis_backend::increment(std::span<const limiter::counter_op> ops, std::span<std::uint64_t> results,
                              limiter::completion& done) {
  run(true, ops, results, done);
}

void redis_backend::get(std::span<const limiter::counter_op> ops, std::span<std::uint64_t> results,
                        limiter::completion& done) {
  run(false, ops, results, done);
}

void redis_backend::run(bool increment, std::span<const limiter::counter_op> ops,
                        std::span<std::uint64_t> results, limiter::completion& done) {
  if (ops.empty()) return done.complete(nullptr);
  auto* state = new batch(done, ops, results, increment);
  // Group the ops: per store, or per key where the store routes each key on its own.
  std::size_t store_part[2] = {SIZE_MAX, SIZE_MAX};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const int which = ops[i].per_second && per_second_ != nullptr ? 1 : 0;
    rd::store* store = which == 1 ? per_second_ : &main_;
    if (store->one_key_per_request() || store_part[which] == SIZE_MAX) {
      store_part[which] = state->parts.size();
      state->parts.push_back({store, {}});
    }
    state->parts[store_part[which]].indexes.push_back(i);
  }
  boost::container::small_vector<std::shared_ptr<rd::pending_request>, 2> requests;
  for (std::size_t which = 0; which < state->parts.size(); ++which) {
    rd::request encoded;
    char a[24], b[24];
    for (auto i : state->parts[which].indexes) {
      if (increment && ops[i].refund) {
        encoded.push({"EVAL", refund_script, "1", ops[i].key, to_text(a, ops[i].increment)});
      } else if (increment) {
        encoded.push({"INCRBY", ops[i].key, to_text(a, ops[i].increment)});
        encoded.push({"EXPIRE", ops[i].key, to_text(b, ops[i].ttl_seconds)});
      } else {
        encoded.push({"GET", ops[i].key});
      }
    }
    auto& r = requests.emplace_back(std::make_shared<rd::pending_request>());
    r->expected_replies = encoded.expected_replies();
    r->payload = encoded.release_payload();
    r->done = [state, which](boost::system::error_code ec, std::vector<rd::value>&& replies) {
      state->on_replies(which, ec, replies);
      state->finish_one();
    };
  }
  state->pending.add(requests.size());
  // Only now: a store may complete inline (nothing reachable), and the state must be fully built by then. The
  // routing keys are read before sending: the last completion deletes the state.
  boost::container::small_vector<std::pair<rd::store*, std::string_view>, 2> targets;
  for (const auto& p : state->parts) targets.emplace_back(p.store, ops[p.indexes.front()].key);
  for (std::size_t which = 0; which < requests.size(); ++which) {
    targets[which].first->exec(std::move(requests[which]), targets[which].second);
  }
}

limiter::trace_description redis_backend::describe_for_trace(std::span<const limiter::counter_op> ops) const {
  std::int64_t main = 0, per_second = 0;
  for (const auto& op : ops) ++(op.per_second && per_second_ != nullptr ? per_second : main);
  return {"Redis Pipeline Execution",
          {{{"pipeline length", 2 * main}, {"perSecondPipeline length", 2 * per_second}}},
          2};
}

}  // namespace sluice::ratelimit::backends::redis
