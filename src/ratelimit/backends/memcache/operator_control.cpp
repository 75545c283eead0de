// The memcached store's side of operator control (the counters API): reading a descriptor's counters
// without counting, and setting or deleting them. One request per key, to the node that holds it.

#include <functional>
#include <memory>
#include <optional>

#include "core/problem.hpp"
#include "core/strings.hpp"
#include "memcache/error.hpp"
#include "ratelimit/backends/memcache/memcache_backend.hpp"
#include "ratelimit/limiter/pending_operations.hpp"
#include "ratelimit/limiter/sliding_window.hpp"

namespace sluice::ratelimit::backends::memcache {

namespace mc = sluice::memcache;

namespace {

struct control_call {
  control_call(mc::client& c, limiter::completion& done) : client(c), pending(done) {}
  mc::client& client;
  limiter::pending_operations pending;

  using reader = std::function<void(const mc::reply&)>;
  // `placed_by`: the part of the key that picks its node (a sliding window's hash tag).
  void send(std::string_view placed_by, std::shared_ptr<mc::pending_request> request, reader read) {
    const auto node = client.pick(placed_by);
    request->done = [this, node, read = std::move(read)](boost::system::error_code ec,
                                                         std::vector<mc::reply>&& replies) {
      const auto& address = client.address(node);
      if (ec) {
        pending.fail(ec == mc::error::not_connected
                         ? core::cat("memcached at ", address, " is unavailable: ", client.last_error())
                         : core::cat("memcached at ", address, ": ", ec.message()));
      } else if (const auto* r = first_error(replies)) {
        pending.fail(core::cat("memcached at ", address, " answered ",
                               r->result == mc::reply::status::error ? std::string("ERROR") : r->message));
      } else if (read) {
        read(replies.at(0));
      }
      if (pending.finish_one()) delete this;
    };
    pending.add();
    client.exec(node, std::move(request));
  }
  static const mc::reply* first_error(const std::vector<mc::reply>& replies) {
    using status = mc::reply::status;
    for (const auto& r : replies)
      if (r.result == status::error || r.result == status::client_error || r.result == status::server_error)
        return &r;
    return nullptr;
  }
  void end() {
    if (pending.finish_one()) delete this;
  }
};

std::string_view placement(const limiter::counter_op& op) {
  if (op.kind() != limiter::op_kind::sliding) return op.key;
  return op.key.substr(0, op.key.rfind('}') + 1);  // as memcache_backend places a sliding window's keys
}

std::shared_ptr<mc::pending_request> get_request(const limiter::counter_op& op) {
  auto request = std::make_shared<mc::pending_request>();
  mc::add_get_key(request->get_keys, op.key);
  if (op.kind() == limiter::op_kind::sliding)
    mc::add_get_key(request->get_keys, limiter::previous_key_of(op));
  return request;
}

core::problem refuse(std::span<const limiter::counter_op> ops) {
  for (const auto& op : ops) {
    if (op.kind() == limiter::op_kind::gcra || op.kind() == limiter::op_kind::concurrency)
      return "memcached holds no GCRA or concurrency keys (BACKEND_TYPE=memcache refuses those algorithms)";
    for (auto key : {op.key, limiter::previous_key_of(op)}) {
      if (key.empty()) continue;
      if (auto problem = mc::key_problem(key))
        return core::cat("memcached cannot hold key '", key, "': ", *problem);
    }
  }
  return std::nullopt;
}

}  // namespace

void memcache_backend::inspect(std::span<const limiter::counter_op> ops,
                               std::span<limiter::op_result> results, limiter::completion& done) {
  if (auto problem = refuse(ops)) {
    limiter::backend_error e{*problem};
    return done.complete(&e);
  }
  auto* call = new control_call(client_, done);
  call->pending.add();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    auto& out = results[i];
    out = {};
    call->send(placement(op), get_request(op), [call, &op, &out](const mc::reply& reply) {
      for (const auto& item : reply.items) {
        std::uint64_t v = 0;
        if (!core::parse_unsigned(item.data, v))
          return call->pending.fail(
              core::cat("memcached holds a value that is not a counter under key '", item.key, "'"));
        if (item.key == op.key) out.value = out.before = v;
        if (op.kind() == limiter::op_kind::sliding && item.key == limiter::previous_key_of(op))
          out.previous = v;
      }
    });
  }
  call->end();
}

void memcache_backend::overwrite(std::span<const limiter::counter_op> ops, limiter::completion& done) {
  if (auto problem = refuse(ops)) {
    limiter::backend_error e{*problem};
    return done.complete(&e);
  }
  auto* call = new control_call(client_, done);
  call->pending.add();
  const auto now = clock_.now_seconds();
  for (const auto& op : ops) {
    auto request = std::make_shared<mc::pending_request>();
    if (op.increment == 0) {
      mc::encode_delete(request->payload, op.key);
      request->expected.push_back(mc::reply_kind::erase);
    } else {
      mc::encode_set(request->payload, op.key, core::decimal(op.increment).text(),
                     mc::exptime_for(op.ttl_seconds, now));
      request->expected.push_back(mc::reply_kind::store);
    }
    if (op.kind() == limiter::op_kind::sliding) {
      mc::encode_delete(request->payload, limiter::previous_key_of(op));
      request->expected.push_back(mc::reply_kind::erase);
    }
    call->send(placement(op), std::move(request), {});
  }
  call->end();
}

}  // namespace sluice::ratelimit::backends::memcache
