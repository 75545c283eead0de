#include "ratelimit/backends/redis/redis_backend.hpp"

#include <boost/container/small_vector.hpp>
#include <mutex>
#include <optional>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/counter_commands.hpp"
#include "ratelimit/backends/redis/gcra_command.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "ratelimit/limiter/pending_operations.hpp"
#include "redis/cluster_slot.hpp"
#include "redis/error.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace {

using index_list = boost::container::small_vector<std::size_t, 4>;

}  // namespace

// What one decision waits for: its pipelines (one per store, or per key on a cluster) and its script groups
// (through the stores' script_batchers), finished in any order, on any thread. It is their completion: when
// the last one is in, an all-or-nothing batch split over several nodes may still have to take back what some
// of them applied.
struct batch final : limiter::completion {
  struct part {
    redis_backend::store_pair* store;
    index_list indexes;    // which ops it carries, in reply order
    bool script;           // a decide_script group; otherwise a pipeline of plain commands
    bool applied = false;  // a script group: its reply says it applied its ops
  };

  batch(limiter::completion& d, std::span<const limiter::counter_op> o, std::span<limiter::op_result> r,
        limiter::batch_mode m, bool g)
      : pending(*this), done(d), ops(o), results(r), mode(m), get(g) {}

  limiter::pending_operations pending;
  limiter::completion& done;
  std::span<const limiter::counter_op> ops;
  std::span<limiter::op_result> results;
  limiter::batch_mode mode;
  bool get;  // GET the counters (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's read ahead)
  // Sliding ops whose previous window's count the store's previous_counts knew: no MGET for them. Sized
  // before sending when there are sliding ops (each part writes and reads only its own).
  boost::container::small_vector<bool, 4> previous_known;
  boost::container::small_vector<part, 4> parts;
  // Compensation: the ops that take back what applied parts counted, and the error that failed the decision.
  boost::container::small_vector<limiter::counter_op, 4> undo_ops;
  bool compensating = false;
  std::optional<std::string> failure;

  // An all-or-nothing batch over several nodes: each node judges its quota limits as advisory (the request's
  // quota verdict needs them all), and the verdict is taken here once every part has answered.
  bool split() const { return mode == limiter::batch_mode::all_or_nothing && parts.size() > 1; }
  bool verdict_refuses() const;
  void compensate();

  bool mgets_previous(std::size_t i) const {
    return ops[i].kind() == limiter::op_kind::sliding && !previous_known[i];
  }
  std::span<const limiter::counter_op> current_ops() const {
    return compensating ? std::span<const limiter::counter_op>(undo_ops) : ops;
  }
  void send(std::size_t which);
  void on_pipeline(std::size_t which, boost::system::error_code ec, const std::vector<rd::value>& replies);
  void on_script(std::size_t which, const std::string* error, const script_batcher::answer& reply);
  void take_back(rd::store& store, const limiter::counter_op& op);
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
  const auto all = current_ops();
  if (p.script) {
    const script_group group{all, p.indexes, compensating ? limiter::batch_mode::independent : mode,
                             !compensating && split()};
    p.store->scripts.add(group, all[p.indexes.front()].key,
                         [this, which](const std::string* error, const script_batcher::answer& reply) {
                           on_script(which, error, reply);
                           pending.finish_one();
                         });
    return;
  }
  rd::request encoded;
  std::size_t room = 0;  // INCRBY and EXPIRE of each key with their framing; a rare MGET may grow it
  for (auto i : p.indexes) room += 2 * all[i].key.size() + 80;
  encoded.reserve(room);
  // The previous windows of sliding windows are read with one MGET after the counters (a part on a cluster
  // holds one op), but for the final counts this worker read before.
  boost::container::small_vector<std::string_view, 8> previous{"MGET"};
  for (auto i : p.indexes) {
    const auto& op = all[i];
    if (get) {
      encoded.push({"GET", op.key});
    } else if (op.refund) {
      encoded.push({"EVAL", refund_script, "1", op.key, core::decimal(op.increment).text()});
    } else {
      encoded.push({"INCRBY", op.key, core::decimal(op.increment).text()});
      encoded.push({"EXPIRE", op.key, core::decimal(op.ttl_seconds).text()});
    }
    if (get || op.kind() != limiter::op_kind::sliding) continue;
    if (auto count = p.store->previous.find(op)) {
      results[i].previous = *count;
      previous_known[i] = true;
    } else {
      previous.push_back(std::get<limiter::sliding_window_op>(op.algorithm).previous_key);
    }
  }
  if (previous.size() > 1) encoded.push(std::span<const std::string_view>(previous.data(), previous.size()));
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, which](boost::system::error_code ec, std::vector<rd::value>&& replies) {
    on_pipeline(which, ec, replies);
    pending.finish_one();
  };
  // The routing key is read before sending: the last completion may delete the batch.
  const std::string_view key = all[p.indexes.front()].key;
  p.store->store.exec(std::move(request), key);
}

void batch::on_script(std::size_t which, const std::string* error, const script_batcher::answer& reply) {
  auto& p = parts[which];
  if (error != nullptr) return pending.fail(*error);
  if (compensating) return;  // what was taken back changes no decision
  if (reply.script == nullptr) {
    // A BITFIELD per op (the script_batcher checked their PEXPIREs).
    if (reply.gcra.size() != p.indexes.size()) return pending.fail("Redis returned too few replies");
    for (std::size_t k = 0; k < p.indexes.size(); ++k) {
      const auto& bitfield = reply.gcra[k];
      if (bitfield.is_error()) return pending.fail(core::cat("Redis error: ", bitfield.text));
      if (!read_gcra(bitfield, ops[p.indexes[k]], results[p.indexes[k]]))
        return pending.fail("Redis returned a reply that is not GCRA's BITFIELD");
    }
    p.applied = true;
    return;
  }
  std::size_t at = reply.at;
  auto applied = read_decide_reply(*reply.script, at, ops, p.indexes, results);
  if (!applied) return pending.fail("Redis returned a reply that is not the decide script's");
  p.applied = *applied;
}

void batch::on_pipeline(std::size_t which, boost::system::error_code ec,
                        const std::vector<rd::value>& replies) {
  auto& p = parts[which];
  if (ec) return pending.fail(p.store->store.describe(ec), false, rd::may_have_run(ec));
  std::size_t next = 0;
  const rd::value* previous = nullptr;  // MGET's reply, after the counters'
  std::size_t previous_next = 0;
  if (!get && std::ranges::any_of(p.indexes, [&](auto i) { return mgets_previous(i); })) {
    previous = &replies.back();
    if (previous->type != rd::value::kind::array)
      return pending.fail(core::cat("Redis error: ", previous->text), refuses_for_good(previous->text));
  }
  for (auto index : p.indexes) {
    const auto& op = ops[index];
    const auto& reply = replies[next++];
    if (reply.is_error())
      return pending.fail(core::cat("Redis error: ", reply.text), refuses_for_good(reply.text));
    // INCRBY's reply is followed by EXPIRE's. A counter without its EXPIRE would never go away: that is a
    // failure too.
    if (!get && !op.refund && replies[next++].is_error()) {
      return pending.fail(core::cat("Redis error: ", replies[next - 1].text),
                          refuses_for_good(replies[next - 1].text));
    }
    if (op.kind() == limiter::op_kind::gcra) {  // read ahead: the arrival time, in BITFIELD's form
      results[index].value = reply.type == rd::value::kind::bulk_string ? gcra_time(reply.text) : 0;
      continue;
    }
    auto v = counter_value(reply);
    if (!v) return pending.fail("Redis returned a value that is not a counter", true);
    results[index].value = *v;
    if (get || op.kind() != limiter::op_kind::sliding) continue;
    if (mgets_previous(index)) {
      if (previous_next >= previous->elements.size()) return pending.fail("Redis returned too few values");
      auto before = counter_value(previous->elements[previous_next++]);
      if (!before) return pending.fail("Redis returned a value that is not a counter");
      results[index].previous = *before;
      p.store->previous.remember(op, *before);
    }
    // A sliding window counts only what it admits: hits it did not admit are taken back (usage keeps them).
    // The decision does not wait for that; until it lands the window looks fuller than it is (stricter, never
    // looser).
    if (!limiter::applies(op, limiter::admits(op, results[index]))) take_back(p.store->store, op);
  }
}

void batch::take_back(rd::store& store, const limiter::counter_op& op) {
  rd::request encoded;
  encoded.push({"DECRBY", op.key, core::decimal(op.increment).text()});
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [](boost::system::error_code, std::vector<rd::value>&&) {};
  store.exec(std::move(request), op.key);
}

bool batch::verdict_refuses() const {
  if (std::ranges::any_of(parts, [](const part& p) { return !p.applied; })) return true;
  limiter::batch_verdict verdict;
  for (std::size_t i = 0; i < ops.size(); ++i) verdict.add(ops[i], limiter::admits(ops[i], results[i]));
  return !verdict.applies();
}

// Takes back what the parts that applied changed (their ops that changed the store).
void batch::compensate() {
  compensating = true;
  boost::container::small_vector<part, 4> undo;
  for (const auto& p : parts) {
    if (!p.applied) continue;
    part u{p.store, {}, true};
    for (auto i : p.indexes) {
      auto op = ops[i];
      // Usage stays counted: the script applied it whatever the verdict.
      if (op.usage || !limiter::applies(op, limiter::admits(op, results[i]))) continue;
      if (!op.refund) {
        op.refund = true;
      } else if (op.kind() != limiter::op_kind::gcra && results[i].before > results[i].value) {
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
  parts = std::move(undo);
}

void batch::complete(const limiter::backend_error* error) noexcept {
  // An all-or-nothing batch over several nodes (a cluster's slots, or the per-second store) is atomic on
  // each: when the request is refused, or a node failed, what the parts that applied changed is taken back.
  if (!compensating && split() && (error != nullptr || verdict_refuses())) {
    if (error != nullptr) failure = error->message;
    compensate();
    if (!parts.empty()) {
      send_all();
      return;
    }
  }
  // A failed compensation changes no decision: the request was refused (or failed) either way.
  const limiter::backend_error failed{failure.value_or(std::string())};
  done.complete(compensating ? (failure ? &failed : nullptr) : error);
  delete this;
}

redis_backend::redis_backend(boost::asio::any_io_executor ex, rd::store& main, rd::store* per_second)
    : main_(std::make_unique<store_pair>(ex, main)),
      per_second_(per_second != nullptr ? std::make_unique<store_pair>(ex, *per_second) : nullptr) {}

redis_backend::~redis_backend() = default;

void redis_backend::increment(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                              limiter::completion& done, limiter::batch_mode mode) {
  run(false, ops, results, done, mode);
}

void redis_backend::get(std::span<const limiter::counter_op> ops, std::span<limiter::op_result> results,
                        limiter::completion& done) {
  run(true, ops, results, done, limiter::batch_mode::independent);
}

void redis_backend::run(bool get, std::span<const limiter::counter_op> ops,
                        std::span<limiter::op_result> results, limiter::completion& done,
                        limiter::batch_mode mode) {
  if (ops.empty()) return done.complete(nullptr);
  if (mode != limiter::batch_mode::independent) {
    if (const auto refused = limiter::refuse_concurrency_all_or_nothing(ops)) return done.complete(&*refused);
  }
  auto* state = new batch(done, ops, results, mode, get);
  if (std::ranges::any_of(ops, [](const auto& op) { return op.kind() == limiter::op_kind::sliding; }))
    state->previous_known.resize(ops.size());
  // Group the ops: per store, plain commands apart from script groups (GCRA, and every op of an
  // all-or-nothing batch; the script_batcher sends GCRA on keys no other decision of the turn touches as
  // BITFIELDs); on a cluster, plain commands per op and script groups per slot.
  struct group_key {
    store_pair* store;
    bool script;
    std::size_t slot;
    bool operator==(const group_key&) const = default;
  };
  boost::container::small_vector<group_key, 4> groups;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (get && ops[i].kind() == limiter::op_kind::concurrency)
      continue;  // read ahead for fixed windows only: a lease HASH holds no count
    store_pair* store = ops[i].per_second && per_second_ ? per_second_.get() : main_.get();
    const bool script =
        !get && (mode != limiter::batch_mode::independent || limiter::decided_in_store(ops[i]));
    std::size_t slot = 0;
    if (store->store.one_key_per_request()) slot = script ? rd::hash_slot(ops[i].key) : SIZE_MAX - i;
    const group_key key{store, script, slot};
    auto it = std::ranges::find(groups, key);
    if (it == groups.end()) {
      groups.push_back(key);
      state->parts.push_back({store, {}, script});
      it = groups.end() - 1;
    }
    state->parts[static_cast<std::size_t>(it - groups.begin())].indexes.push_back(i);
  }
  state->send_all();
}

limiter::trace_description redis_backend::describe_for_trace(std::span<const limiter::counter_op> ops) const {
  std::int64_t main = 0, per_second = 0;
  for (const auto& op : ops) ++(op.per_second && per_second_ ? per_second : main);
  return {"Redis Pipeline Execution",
          {{{"pipeline length", 2 * main}, {"perSecondPipeline length", 2 * per_second}}},
          2};
}

}  // namespace sluice::ratelimit::backends::redis
