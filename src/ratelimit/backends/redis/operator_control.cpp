// The Redis store's side of operator control (the counters API): reading a descriptor's keys without
// counting, and setting or deleting them. Rare and small: one request per key, each routed by its key (a
// sliding window's previous counter may live in another cluster slot).

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <functional>
#include <memory>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/counter_commands.hpp"
#include "ratelimit/backends/redis/gcra_command.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "ratelimit/limiter/leases.hpp"
#include "ratelimit/limiter/pending_operations.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

// Requests in flight for one call: the last reply completes it and frees this.
struct control_call {
  explicit control_call(limiter::completion& done) : pending(done) {}
  limiter::pending_operations pending;

  using reader = std::function<void(const std::vector<rd::value>&)>;
  void send(rd::store& store, std::string_view key, rd::request& encoded, reader read) {
    auto request = std::make_shared<rd::pending_request>();
    request->expected_replies = encoded.expected_replies();
    request->payload = encoded.release_payload();
    request->done = [this, &store, read = std::move(read)](boost::system::error_code ec,
                                                           std::vector<rd::value>&& replies) {
      if (ec) {
        pending.fail(store.describe(ec));
      } else if (const auto* error = first_error(replies)) {
        pending.fail(core::cat("Redis error: ", error->text), refuses_for_good(error->text));
      } else if (read) {
        read(replies);
      }
      if (pending.finish_one()) delete this;
    };
    pending.add();
    store.exec(std::move(request), key);
  }
  // One count more while sending: a store that cannot be reached fails its request inline.
  void begin() { pending.add(); }
  void end() {
    if (pending.finish_one()) delete this;
  }

  static const rd::value* first_error(const std::vector<rd::value>& replies) {
    for (const auto& r : replies)
      if (r.is_error()) return &r;
    return nullptr;
  }
};

// A counter's GET: its value, or a failure.
bool read_counter(control_call& call, const rd::value& reply, std::uint64_t& out) {
  auto v = counter_value(reply);
  if (!v) {
    call.pending.fail("Redis returned a value that is not a counter", true);
    return false;
  }
  out = *v;
  return true;
}

// The arrival time as GCRA's keys hold it: 8 bytes, big-endian (gcra_command.hpp).
std::string gcra_bytes(std::uint64_t tat) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i, tat >>= 8) bytes[static_cast<std::size_t>(i)] = static_cast<char>(tat & 0xff);
  return bytes;
}

}  // namespace

void redis_backend::inspect(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                            limiter::completion& done) {
  auto* call = new control_call(done);
  call->begin();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    auto& out = results[i];
    out = {};
    auto& store = store_for(op);
    rd::request encoded;
    switch (op.kind) {
      case limiter::op_kind::concurrency:
        encoded.push({"HGETALL", op.key});
        call->send(store, op.key, encoded, [call, &op, &out](const std::vector<rd::value>& replies) {
          limiter::lease_slices slices;
          const auto& fields = replies[0].elements;
          for (std::size_t f = 0; f + 1 < fields.size(); f += 2) {
            std::uint64_t slice = 0, count = 0;
            if (!core::parse_unsigned(fields[f].text, slice) ||
                !core::parse_unsigned(fields[f + 1].text, count))
              return call->pending.fail("Redis holds a lease HASH that is not Sluice's", true);
            slices.emplace_back(static_cast<std::int64_t>(slice), count);
          }
          std::ranges::sort(slices);
          const auto r =
              limiter::apply_lease_op(slices, {op.window_us, op.tolerance_us}, op.now_us, 0, false, op.limit);
          out.value = out.before = r.before;
          out.oldest_end_us = r.oldest_end_us;
        });
        break;
      case limiter::op_kind::gcra:
        encoded.push({"GET", op.key});
        call->send(store, op.key, encoded, [&op, &out](const std::vector<rd::value>& replies) {
          out.before = replies[0].type == rd::value::kind::bulk_string ? gcra_time(replies[0].text) : 0;
          out.value = std::max(out.before, static_cast<std::uint64_t>(std::max<std::int64_t>(0, op.now_us)));
        });
        break;
      case limiter::op_kind::sliding: {
        rd::request previous;
        previous.push({"GET", op.previous_key});
        call->send(store, op.previous_key, previous, [call, &out](const std::vector<rd::value>& replies) {
          read_counter(*call, replies[0], out.previous);
        });
        [[fallthrough]];
      }
      case limiter::op_kind::count:
        encoded.push({"GET", op.key});
        call->send(store, op.key, encoded, [call, &out](const std::vector<rd::value>& replies) {
          if (read_counter(*call, replies[0], out.value)) out.before = out.value;
        });
        break;
    }
  }
  call->end();
}

void redis_backend::overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) {
  auto* call = new control_call(done);
  call->begin();
  for (const auto& op : ops) {
    auto& store = store_for(op);
    rd::request encoded;
    const core::decimal value(op.increment);
    switch (op.kind) {
      case limiter::op_kind::concurrency: {
        encoded.push({"DEL", op.key});
        if (op.increment == 0) break;
        const limiter::lease_timing timing{op.window_us, op.tolerance_us};
        const std::int64_t slice = op.now_us / timing.slice_us;
        const std::int64_t ttl_ms = ((slice + timing.slices + 1) * timing.slice_us - op.now_us) / 1000 + 1000;
        encoded.push({"HSET", op.key, core::decimal(slice).text(), value.text()});
        encoded.push({"PEXPIRE", op.key, core::decimal(ttl_ms).text()});
        break;
      }
      case limiter::op_kind::gcra:
        if (op.increment == 0) {
          encoded.push({"DEL", op.key});
        } else {
          encoded.push(
              {"SET", op.key, gcra_bytes(op.increment), "PX", core::decimal(gcra_ttl_ms(op)).text()});
        }
        break;
      case limiter::op_kind::sliding: {
        rd::request previous;
        previous.push({"DEL", op.previous_key});
        call->send(store, op.previous_key, previous, {});
        [[fallthrough]];
      }
      case limiter::op_kind::count:
        if (op.increment == 0) {
          encoded.push({"DEL", op.key});
        } else {
          encoded.push({"SET", op.key, value.text(), "EX", core::decimal(op.ttl_seconds).text()});
        }
        break;
    }
    call->send(store, op.key, encoded, {});
  }
  call->end();
}

}  // namespace sluice::ratelimit::backends::redis
