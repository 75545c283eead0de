#include "ratelimit/backends/memcache/memcache_backend.hpp"

#include <boost/container/small_vector.hpp>
#include <optional>
#include <string>

#include "core/strings.hpp"
#include "memcache/error.hpp"
#include "ratelimit/backends/memcache/settings.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "ratelimit/limiter/pending_operations.hpp"

namespace sluice::ratelimit::backends::memcache {

namespace mc = sluice::memcache;

namespace {

using index_list = boost::container::small_vector<std::size_t, 4>;

enum class round : std::uint8_t {
  first,       // get (increment: of the keys counted up) and incr/decr for every op; get: the get alone
  add,         // add for the keys incr found missing
  incr_again,  // incr for the keys another client added first
  take_back    // decr of what a sliding window counted for a request it did not admit
};

void relaxed_add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// A key as an error message shows it: whole when short, else its start.
std::string shown_key(std::string_view key) {
  return key.size() <= 80 ? std::string(key) : core::cat(key.substr(0, 80), "...");
}

}  // namespace

// What one decision waits for: one request per node and round, all finished on the worker's thread.
struct batch {
  batch(memcache_backend& b, limiter::completion& d, std::span<const limiter::counter_op> o,
        std::span<limiter::op_result> r, bool incr)
      : backend(b), pending(d), ops(o), results(r), increment(incr) {}

  memcache_backend& backend;
  limiter::pending_operations pending;
  std::span<const limiter::counter_op> ops;
  std::span<limiter::op_result> results;
  bool increment;

  void fail(std::string message) { pending.fail(std::move(message)); }
  // The first round's get-multi asks for every key but those given back (negative hits), and for the
  // previous window of a sliding window.
  bool in_multiget(std::size_t i) const { return !increment || !ops[i].refund; }
  bool sliding(std::size_t i) const { return increment && ops[i].kind() == limiter::op_kind::sliding; }
  // Reads the get-multi's values: the current counters (get) or the previous windows (sliding).
  bool read_values(std::string_view address, const index_list& indexes, const mc::reply& values);
  void send(std::size_t node, round r, index_list indexes);
  void on_replies(std::size_t node, round r, const index_list& indexes, boost::system::error_code ec,
                  const std::vector<mc::reply>& replies);
  void finish_one() {
    if (pending.finish_one()) delete this;
  }
};

void batch::send(std::size_t node, round r, index_list indexes) {
  auto request = std::make_shared<mc::pending_request>();
  auto& out = request->payload;
  if (r == round::first) {
    for (auto i : indexes) {
      if (in_multiget(i)) mc::add_get_key(request->get_keys, ops[i].key);
      if (sliding(i)) mc::add_get_key(request->get_keys, limiter::previous_key_of(ops[i]));
    }
  }
  if (increment) {
    const auto now = backend.clock_.now_seconds();
    for (auto i : indexes) {
      const auto& op = ops[i];
      if (r == round::take_back) {
        mc::encode_decr(out, op.key, op.increment);
        request->expected.push_back(mc::reply_kind::incr);
      } else if (r == round::add) {
        mc::encode_add(out, op.key, core::decimal(op.increment).text(), mc::exptime_for(op.ttl_seconds, now));
        request->expected.push_back(mc::reply_kind::store);
      } else if (op.refund) {
        mc::encode_decr(out, op.key, op.increment);
        request->expected.push_back(mc::reply_kind::incr);
      } else {
        mc::encode_incr(out, op.key, op.increment);
        request->expected.push_back(mc::reply_kind::incr);
      }
    }
  }
  pending.add();
  request->done = [this, node, r, indexes](boost::system::error_code ec, std::vector<mc::reply>&& replies) {
    on_replies(node, r, indexes, ec, replies);
    finish_one();
  };
  backend.client_.exec(node, std::move(request));
}

void batch::on_replies(std::size_t node, round r, const index_list& indexes, boost::system::error_code ec,
                       const std::vector<mc::reply>& replies) {
  auto& counts = backend.counts_;
  const auto& address = backend.client_.address(node);
  if (ec) {
    if (r == round::first) relaxed_add(counts.multiget_error);
    if (r == round::take_back) return;  // the counter stays high until its window ends: stricter, not wrong
    if (r == round::add) relaxed_add(counts.add_error, indexes.size());
    if (r != round::add && increment) relaxed_add(counts.increment_error, indexes.size());
    return fail(ec == mc::error::not_connected
                    ? core::cat("memcached at ", address, " is unavailable: ", backend.client_.last_error())
                    : core::cat("memcached at ", address, ": ", ec.message()));
  }
  auto server_error = [&](const mc::reply& reply) {
    return core::cat("memcached at ", address, " answered ",
                     reply.result == mc::reply::status::error ? std::string("ERROR") : reply.message);
  };
  std::size_t next = 0;
  if (r == round::first) {
    std::size_t asked = 0;
    for (auto i : indexes) asked += (in_multiget(i) ? 1 : 0) + (sliding(i) ? 1 : 0);
    if (asked > 0) {
      const auto& values = replies[next++];
      relaxed_add(counts.keys_requested, asked);
      if (values.result != mc::reply::status::values) {
        relaxed_add(counts.multiget_error);
        return fail(server_error(values));
      }
      relaxed_add(counts.multiget_success);
      relaxed_add(counts.keys_found, values.items.size());
      if (!read_values(address, indexes, values) || !increment) return;
    }
  }
  if (r == round::take_back) return;
  index_list missing, taken, over;
  for (auto i : indexes) {
    const auto& reply = replies[next++];
    using status = mc::reply::status;
    if (r == round::add) {
      if (reply.result == status::stored) {
        relaxed_add(counts.add_success);
        results[i].value = ops[i].increment;
      } else if (reply.result == status::not_stored) {
        relaxed_add(counts.add_not_stored);
        taken.push_back(i);
      } else {
        relaxed_add(counts.add_error);
        fail(server_error(reply));
      }
    } else if (reply.result == status::number) {
      relaxed_add(counts.increment_success);
      results[i].value = reply.number;
    } else if (reply.result == status::not_found && ops[i].refund) {
      relaxed_add(counts.increment_miss);
      results[i].value = 0;  // nothing to give back to
    } else if (reply.result == status::not_found && r == round::first) {
      relaxed_add(counts.increment_miss);
      missing.push_back(i);
    } else {
      relaxed_add(counts.increment_error);
      fail(reply.result == status::not_found
               ? core::cat("memcached at ", address, " lost key '", shown_key(ops[i].key), "' while counting")
               : server_error(reply));
    }
  }
  if (pending.failed()) return;
  // memcached cannot check before counting: a sliding window counts, then takes back what it did not admit.
  for (auto i : indexes) {
    const bool counted =
        std::ranges::find(missing, i) == missing.end() && std::ranges::find(taken, i) == taken.end();
    if (sliding(i) && counted && !limiter::applies(ops[i], limiter::admits(ops[i], results[i])))
      over.push_back(i);
  }
  if (!over.empty()) send(node, round::take_back, std::move(over));
  if (!missing.empty()) send(node, round::add, std::move(missing));
  if (!taken.empty()) send(node, round::incr_again, std::move(taken));
}

bool batch::read_values(std::string_view address, const index_list& indexes, const mc::reply& values) {
  // get: a key that is absent counts 0; increment: only the previous windows matter.
  if (!increment)
    for (auto i : indexes) results[i].value = 0;
  for (const auto& item : values.items) {
    const bool wanted = std::ranges::any_of(indexes, [&](std::size_t i) {
      return (!increment && ops[i].key == item.key) ||
             (sliding(i) && limiter::previous_key_of(ops[i]) == item.key);
    });
    if (!wanted) continue;
    std::uint64_t v = 0;
    if (!core::parse_unsigned(item.data, v)) {
      fail(core::cat("memcached at ", address, " holds a value that is not a counter under key '",
                     shown_key(item.key), "'"));
      return false;
    }
    for (auto i : indexes) {
      if (!increment && ops[i].key == item.key) results[i].value = v;
      if (sliding(i) && limiter::previous_key_of(ops[i]) == item.key) results[i].previous = v;
    }
  }
  return true;
}

void memcache_backend::increment(std::span<const limiter::counter_op> ops,
                                 std::span<limiter::op_result> results, limiter::completion& done,
                                 limiter::batch_mode mode) {
  // Such rules load with a warning (memcache_cannot_count); COUNT_ONLY_ADMITTED=true stops start-up.
  auto refuse = [&](std::string_view what) {
    limiter::backend_error e{not_offered(what)};
    done.complete(&e);
  };
  if (mode != limiter::batch_mode::independent && !ops.empty()) return refuse("count_only_admitted");
  if (std::ranges::any_of(ops, [](const auto& op) { return op.kind() == limiter::op_kind::gcra; }))
    return refuse("algorithm gcra");
  if (std::ranges::any_of(ops, [](const auto& op) { return op.kind() == limiter::op_kind::concurrency; }))
    return refuse("algorithm concurrency");
  run(true, ops, results, done);
}

void memcache_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                           limiter::completion& done) {
  run(false, ops, results, done);
}

void memcache_backend::run(bool increment, std::span<const limiter::counter_op> ops,
                           std::span<limiter::op_result> results, limiter::completion& done) {
  if (ops.empty()) return done.complete(nullptr);
  // A key memcached would refuse fails the decision before anything is sent, naming the key.
  for (const auto& op : ops) {
    for (auto key : {op.key, limiter::previous_key_of(op)}) {
      if (key.empty()) continue;  // (no previous window: not a sliding window)
      if (auto problem = mc::key_problem(key)) {
        limiter::backend_error e{
            core::cat("cannot count key '", shown_key(key), "' in memcached: ", *problem)};
        return done.complete(&e);
      }
    }
  }
  if (client_.node_count() == 0) {
    limiter::backend_error e{"no memcached servers are known (MEMCACHE_SRV found no targets)"};
    return done.complete(&e);
  }
  auto* state = new batch(*this, done, ops, results, increment);
  boost::container::small_vector<std::pair<std::size_t, index_list>, 2> groups;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    // A sliding window's two keys must live on one server, whose get-multi reads both: they are placed by
    // their common part, the hash tag (up to '}'). Other keys keep gomemcache's placement by the whole key.
    std::string_view placed_by = ops[i].key;
    if (ops[i].kind() == limiter::op_kind::sliding) placed_by = placed_by.substr(0, placed_by.rfind('}') + 1);
    const auto node = client_.pick(placed_by);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == node; });
    if (it == groups.end()) it = groups.insert(groups.end(), {node, {}});
    it->second.push_back(i);
  }
  // One extra count held while sending: a node that is down fails its request inline, and the state must
  // live until every request is out.
  state->pending.add();
  for (auto& [node, indexes] : groups) state->send(node, round::first, std::move(indexes));
  state->finish_one();
}

}  // namespace sluice::ratelimit::backends::memcache
