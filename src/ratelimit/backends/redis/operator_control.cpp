// The Redis store's side of operator control (the counters API): reading a descriptor's keys without
// counting, and setting or deleting them. Rare and small: one request per key, each routed by its key (a
// sliding window's previous counter may live in another cluster slot).

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <charconv>
#include <functional>
#include <memory>
#include <optional>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/counter_commands.hpp"
#include "ratelimit/backends/redis/decide_script.hpp"
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

// A concurrency limit's holders (decide_script.hpp): the ZSET's holder -> lease end and the HASH's
// 'h'..holder -> slots; nullopt when a key is not Sluice's.
std::optional<limiter::lease_holders> read_holders(const rd::value& ends, const rd::value& slots) {
  limiter::lease_holders held;
  const auto& e = ends.elements;
  for (std::size_t f = 0; f + 1 < e.size(); f += 2) {
    double end = 0;
    const auto& text = e[f + 1].text;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), end);
    if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
    held.push_back({e[f].text, 0, static_cast<std::int64_t>(end)});
  }
  const auto& h = slots.elements;
  for (std::size_t f = 0; f + 1 < h.size(); f += 2) {
    const std::string_view field = h[f].text;
    if (field.empty() || field[0] != 'h') continue;  // ('n': the total)
    std::uint64_t count = 0;
    if (!core::parse_unsigned(h[f + 1].text, count)) return std::nullopt;
    for (auto& holder : held)
      if (holder.holder == field.substr(1)) holder.slots = count;
  }
  return held;
}

// Leaves one holder holding ARGV[2] slots until ARGV[3] (µs), 0 freeing it, keeping the total in step.
constexpr std::string_view set_holder_script = R"lua(
local field = 'h' .. ARGV[1]
local old = tonumber(redis.call('HGET', KEYS[2], field)) or 0
local slots = tonumber(ARGV[2])
if slots == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], field)
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('HSET', KEYS[2], field, slots)
end
local total = redis.call('HINCRBY', KEYS[2], 'n', slots - old)
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 0
end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local ttl = math.max(1000, math.ceil((tonumber(last[2]) - tonumber(ARGV[4])) / 1000) + 1000)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return total
)lua";

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
    if (const auto* per_holder = op.as<limiter::holder_op>()) {
      encoded.push({"ZRANGE", op.key, "0", "-1", "WITHSCORES"});
      encoded.push({"HGETALL", holder_slots_key(op.key)});
      call->send(store, op.key, encoded,
                 [call, &op, per_holder, &out](const std::vector<rd::value>& replies) {
                   const auto held = read_holders(replies[0], replies[1]);
                   if (!held)
                     return call->pending.fail("Redis holds a lease ZSET or HASH that is not Sluice's", true);
                   const std::string_view* holder = per_holder->holder ? &*per_holder->holder : nullptr;
                   const auto r = limiter::inspect_holders(*held, op.now_us, holder);
                   out.value = out.before = r.before;
                   out.oldest_end_us = r.oldest_end_us;
                   out.holders = r.holders;
                   out.holder_slots = r.holder_slots;
                 });
      continue;
    }
    switch (op.kind()) {
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
          const auto& leases = std::get<limiter::lease_op>(op.algorithm);
          const auto r = limiter::apply_lease_op(slices, leases.timing, op.now_us, 0, false, leases.limit);
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
        const auto previous_key = std::get<limiter::sliding_window_op>(op.algorithm).previous_key;
        rd::request previous;
        previous.push({"GET", previous_key});
        call->send(store, previous_key, previous, [call, &out](const std::vector<rd::value>& replies) {
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
    if (const auto* per_holder = op.as<limiter::holder_op>()) {
      const std::string slots_key = holder_slots_key(op.key);
      if (!per_holder->holder) {
        encoded.push({"DEL", op.key, slots_key});  // (the whole set is only ever freed)
      } else {
        encoded.push({"EVAL", set_holder_script, "2", op.key, slots_key, *per_holder->holder, value.text(),
                      core::decimal(op.now_us + per_holder->lease_us).text(),
                      core::decimal(op.now_us).text()});
      }
      call->send(store, op.key, encoded, {});
      continue;
    }
    switch (op.kind()) {
      case limiter::op_kind::concurrency: {
        encoded.push({"DEL", op.key});
        if (op.increment == 0) break;
        const auto& timing = std::get<limiter::lease_op>(op.algorithm).timing;
        const std::int64_t slice = op.now_us / timing.slice_us;
        // (as the decide script: gone a second after the slice's lease ends)
        const std::int64_t ttl_ms = (limiter::slice_lease_end_us(slice, timing) - op.now_us) / 1000 + 1000;
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
        const auto previous_key = std::get<limiter::sliding_window_op>(op.algorithm).previous_key;
        rd::request previous;
        previous.push({"DEL", previous_key});
        call->send(store, previous_key, previous, {});
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
