// synced_backend's other half (the decisions are in synced_backend.cpp): every interval the counters' unsent
// hits go to Redis, and its answers, failures and refusals come back; the timer, the stop's drain.

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "ratelimit/backends/redis/counter_commands.hpp"
#include "ratelimit/backends/redis/synced_backend.hpp"
#include "redis/error.hpp"

namespace sluice::ratelimit::backends::redis {

namespace asio = boost::asio;
namespace rd = sluice::redis;

void synced_backend::flush() {
  std::vector<synced_counters::flush_item> items;
  counters_.take_flush(items);
  // Held while sending: a store that cannot be reached answers inline, and a drain must not end before every
  // request is out.
  ++flushes_in_flight_;
  bool sent_to_main = false, sent_to_per_second = false;
  if (!items.empty()) {
    // Per store. On a cluster one key per request: a redirection (-MOVED, -ASK during a slot's migration)
    // is then followed for that key alone. Each node's connections still carry all of them in one write.
    auto store_of = [this](const synced_counters::flush_item& item) {
      return &store_for(item.counter->per_second);
    };
    std::ranges::stable_sort(items, {}, store_of);
    for (std::size_t from = 0; from < items.size();) {
      auto* store = store_of(items[from]);
      const std::size_t most = store->one_key_per_request() ? 1 : options_.keys_per_request;
      std::size_t to = from + 1;
      while (to < items.size() && to - from < most && store_of(items[to]) == store) ++to;
      send_flush(*store, {items.begin() + static_cast<std::ptrdiff_t>(from),
                          items.begin() + static_cast<std::ptrdiff_t>(to)});
      (store == &main_ ? sent_to_main : sent_to_per_second) = true;
      from = to;
    }
  }
  // A failing store that got nothing to count is asked whether it answers: its recovery is told when it
  // comes, not with the next decision.
  if (main_state_.failing && !sent_to_main) probe(main_);
  if (per_second_ != nullptr && per_second_state_.failing && !sent_to_per_second) probe(*per_second_);
  --flushes_in_flight_;
  unsent_mirror_.store(counters_.unsent(), std::memory_order_relaxed);
  keys_mirror_.store(counters_.size(), std::memory_order_relaxed);
}

void synced_backend::send_flush(rd::store& store, std::vector<synced_counters::flush_item> items) {
  rd::request encoded;
  for (const auto& item : items) {
    if (item.beyond > 0) {  // first: the worker's own hits in this flush are not other workers' to give back
      encoded.push({"EVAL", unseen_refund_script, "1", item.key, core::decimal(item.beyond).text(),
                    core::decimal(item.seen).text()});
    }
    if (item.hits > 0) {
      encoded.push({"INCRBY", item.key, core::decimal(static_cast<std::uint64_t>(item.hits)).text()});
      encoded.push({"EXPIRE", item.key, core::decimal(item.counter->ttl_seconds).text()});
    } else if (item.hits < 0) {
      encoded.push({"EVAL", refund_script, "1", item.key,
                    core::decimal(static_cast<std::uint64_t>(-item.hits)).text()});
    }
  }
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  const std::string_view key = items.front().key;
  request->done = [this, &store, items = std::move(items), sent = std::chrono::steady_clock::now()](
                      boost::system::error_code ec, std::vector<rd::value>&& replies) mutable {
    asio::dispatch(ex_, [this, &store, items = std::move(items), ec, replies = std::move(replies), sent] {
      on_flush(store, items, ec, replies, sent);
    });
  };
  ++flushes_in_flight_;
  store.exec(std::move(request), key);
}

void synced_backend::probe(rd::store& store) {
  rd::request encoded;
  encoded.push({"PING"});
  auto request = std::make_shared<rd::pending_request>();
  request->expected_replies = encoded.expected_replies();
  request->payload = encoded.release_payload();
  request->done = [this, &store](boost::system::error_code ec, std::vector<rd::value>&&) {
    asio::dispatch(ex_, [this, &store, ec] {
      --flushes_in_flight_;
      if (ec) {
        redis_failed(store, store.describe(ec));
      } else {
        redis_answered(store);
      }
      check_drained();
    });
  };
  ++flushes_in_flight_;
  store.exec(std::move(request), {});
}

void synced_backend::on_flush(rd::store& store, const std::vector<synced_counters::flush_item>& items,
                              boost::system::error_code ec, const std::vector<rd::value>& replies,
                              std::chrono::steady_clock::time_point sent) {
  --flushes_in_flight_;
  if (ec) {
    stats_.flush_errors.inc();
    for (const auto& item : items) counters_.flush_failed(*item.counter, rd::may_have_run(ec));
    redis_failed(store, store.describe(ec));
  } else {
    const std::int64_t now = clock_.now_micros();
    std::size_t at = 0;
    std::string_view not_now;  // an error reply meaning Redis takes no writes now (READONLY, LOADING, ...)
    for (const auto& item : items) {
      // The beyond refund's reply, then the hits' (and their EXPIRE's). An error in either is the item's:
      // both write one key on one node, which takes both or neither (READONLY, LOADING, OOM, ...).
      const rd::value* beyond = item.beyond > 0 ? &replies[at++] : nullptr;
      const rd::value* counted = item.hits != 0 ? &replies[at++] : nullptr;
      const rd::value* expire = item.hits > 0 ? &replies[at++] : nullptr;
      const auto& reply =
          beyond != nullptr && (beyond->is_error() || counted == nullptr) ? *beyond : *counted;
      auto value = counter_value(reply);
      if (reply.is_error() && !refuses_for_good(reply.text)) {
        counters_.flush_failed(*item.counter, false);  // not applied: sent again
        not_now = reply.text;
      } else if (reply.is_error() || !value) {
        refused(item, reply.is_error() ? reply.text : "its value is not a counter");
      } else {
        counters_.flush_answered(*item.counter, *value, now);
        // Counted, but it may never expire: logged, as the hits are in.
        if (expire != nullptr && expire->is_error())
          core::log_error("Redis counted the hits sent for ", item.key,
                          " but refused their EXPIRE: ", expire->text);
      }
    }
    if (!not_now.empty()) {
      stats_.flush_errors.inc();
      redis_failed(store, not_now);
    }
    stats_.flushes.inc();
    stats_.flushed_keys.add(items.size());
    stats_.flush_time.record_since(sent);
    if (not_now.empty()) redis_answered(store);
  }
  unsent_mirror_.store(counters_.unsent(), std::memory_order_relaxed);
  // A drain sends what came in while this flush was out; after a failure it ends (check_drained).
  if (draining_ && !state_of(store).failing) flush();
  check_drained();
}

void synced_backend::refused(const synced_counters::flush_item& item, std::string_view why) {
  if (item.hits > 0) stats_.dropped_hits.add(static_cast<std::uint64_t>(item.hits));
  if (item.hits < 0) stats_.dropped_refunds.add(static_cast<std::uint64_t>(-item.hits));
  counters_.flush_refused(
      *item.counter);  // read again next time: its decisions then fail as without batching
  core::log_error("Redis refused the ", item.hits, " hits sent for ", item.key, ": ", why);
}

// A store is failing from a failure until two intervals pass without one and it answers (a cluster with one
// node down fails some requests of every flush and answers others: it stays failing). The log follows the
// number of failing stores over every worker: one line when the first fails, one when the last recovers.
void synced_backend::redis_failed(rd::store& store, std::string_view why) {
  auto& state = state_of(store);
  state.failed_at_us = clock_.now_micros();
  if (std::exchange(state.failing, true)) return;
  if (stats_.failing_stores.fetch_add(1) == 0) {
    core::log_warn(
        "Redis is unreachable (", why,
        "): deciding from local counts until it answers again; the hits counted meanwhile are kept and "
        "sent then");
  }
}

void synced_backend::redis_answered(rd::store& store) {
  auto& state = state_of(store);
  if (!state.failing || clock_.now_micros() - state.failed_at_us < 2 * interval_us_) return;
  state.failing = false;
  if (stats_.failing_stores.fetch_sub(1) == 1) {
    core::log_warn("Redis answers again: sending the hits counted meanwhile");  // paired with the outage's
  }
}

synced_backend::store_state& synced_backend::state_of(const rd::store& store) {
  return &store == per_second_ ? per_second_state_ : main_state_;
}

synced_backend::store_state& synced_backend::state_for(const limiter::counter_op& op) {
  return state_of(store_for(op.per_second));
}

// Keys of SECOND limits go to the per-second Redis, when there is one (as in redis_backend).
rd::store& synced_backend::store_for(bool per_second) {
  return per_second && per_second_ != nullptr ? *per_second_ : main_;
}

void synced_backend::start() {
  asio::post(ex_, [this] {
    timer_.expires_at(std::chrono::steady_clock::now());
    schedule();
  });
}

// Every interval from the start, whatever a tick took (the bound counts on flushes an interval apart).
void synced_backend::schedule() {
  timer_.expires_at(timer_.expiry() + options_.interval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    tick();
    schedule();
  });
}

void synced_backend::tick() {
  flush();
  const std::int64_t now = wall_.now_seconds();
  if (now != last_sweep_) {
    last_sweep_ = now;
    counters_.sweep(now);
  }
}

void synced_backend::drain(std::function<void()> done) {
  draining_ = std::move(done);
  flush();
  check_drained();
}

void synced_backend::check_drained() {
  if (!draining_ || flushes_in_flight_ > 0) return;
  if (counters_.dirty() > 0 && !main_state_.failing && !per_second_state_.failing) return;
  stats_.lost_at_stop.fetch_add(counters_.unsent());  // logged once for all workers (backend_holder::drain)
  auto done = std::move(draining_);
  draining_ = nullptr;
  done();
}

void synced_backend::stop() {
  asio::post(ex_, [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

}  // namespace sluice::ratelimit::backends::redis
