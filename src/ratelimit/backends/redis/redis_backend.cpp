#include "ratelimit/backends/redis/redis_backend.hpp"

#include <atomic>
#include <boost/container/small_vector.hpp>
#include <charconv>
#include <mutex>
#include <optional>

#include "core/strings.hpp"
#include "redis/error.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

// What one decision waits for: one pipeline per store involved (0 = main, 1 = per second), finished in any
// order, on any thread.
struct batch {
  batch(limiter::completion& d, std::span<std::uint64_t> r, bool incr)
      : done(d), results(r), increment(incr) {}

  limiter::completion& done;
  std::span<std::uint64_t> results;
  bool increment;
  rd::pool* stores[2] = {nullptr, nullptr};
  boost::container::small_vector<std::size_t, 4> indexes[2];  // which ops each store answers, in reply order
  std::atomic<int> outstanding{0};
  std::mutex mutex;
  std::optional<std::string> error;

  void fail(std::string message) {
    std::lock_guard lock(mutex);
    if (!error) error = std::move(message);
  }
  void on_replies(int which, boost::system::error_code ec, const std::vector<rd::value>& replies);
  void finish_one() {
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (error) {
      limiter::backend_error e{std::move(*error)};
      done.complete(&e);
    } else {
      done.complete(nullptr);
    }
    delete this;
  }
};

std::string_view to_text(char (&buf)[24], std::uint64_t v) {
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return {buf, static_cast<std::size_t>(end - buf)};
}

std::string describe(boost::system::error_code ec, const rd::pool& store) {
  if (ec == rd::error::not_connected) {
    auto last = store.last_error();
    return last.empty() ? std::string("Redis is not connected") : core::cat("Redis is unavailable: ", last);
  }
  const auto& config = store.config();
  if (config.sentinel) return core::cat("Redis master '", config.sentinel->master_name, "': ", ec.message());
  return core::cat("Redis at ", config.address, ": ", ec.message());
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

void batch::on_replies(int which, boost::system::error_code ec, const std::vector<rd::value>& replies) {
  if (ec) return fail(describe(ec, *stores[which]));
  const std::size_t stride = increment ? 2 : 1;  // INCRBY's reply, then EXPIRE's
  const auto& wanted = indexes[which];
  for (std::size_t k = 0; k < wanted.size(); ++k) {
    const auto& reply = replies[k * stride];
    if (reply.is_error()) return fail(core::cat("Redis error: ", reply.text));
    auto v = counter_value(reply);
    if (!v) return fail("Redis returned a value that is not a counter");
    results[wanted[k]] = *v;
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
  auto* state = new batch(done, results, increment);
  state->stores[0] = &main_;
  state->stores[1] = per_second_;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    state->indexes[ops[i].per_second && per_second_ != nullptr ? 1 : 0].push_back(i);
  }
  std::shared_ptr<rd::pending_request> requests[2];
  for (int which = 0; which < 2; ++which) {
    if (state->indexes[which].empty()) continue;
    rd::request encoded;
    char a[24], b[24];
    for (auto i : state->indexes[which]) {
      if (increment) {
        encoded.push({"INCRBY", ops[i].key, to_text(a, ops[i].increment)});
        encoded.push({"EXPIRE", ops[i].key, to_text(b, ops[i].ttl_seconds)});
      } else {
        encoded.push({"GET", ops[i].key});
      }
    }
    auto& r = requests[which] = std::make_shared<rd::pending_request>();
    r->expected_replies = encoded.expected_replies();
    r->payload = encoded.release_payload();
    r->done = [state, which](boost::system::error_code ec, std::vector<rd::value>&& replies) {
      state->on_replies(which, ec, replies);
      state->finish_one();
    };
    state->outstanding.fetch_add(1, std::memory_order_relaxed);
  }
  // Only now: a store may complete inline (none connected), and the state must be fully built by then.
  for (int which = 0; which < 2; ++which) {
    if (requests[which]) state->stores[which]->exec(std::move(requests[which]));
  }
}

}  // namespace sluice::ratelimit::backends::redis
