#include "redis/connection_impl.hpp"

namespace sluice::redis {

asio::awaitable<void> connection::impl::reader() {
  received.clear();
  for (;;) {
    auto [ec, n] = co_await read_some(received.space());
    if (ec) {
      if (!stopping)
        set_error(core::cat("connection to Redis at ", current_address, " lost: ", ec.message()));
      co_return;
    }
    received.commit(n);
    error_code protocol;
    received.consume(requests.on_read(received.data(), protocol));
    if (protocol) {
      closing_locally = true;
      set_error(core::cat("Redis at ", current_address, " sent something that is not RESP; reconnecting"));
      co_return;
    }
  }
}

asio::awaitable<void> connection::impl::writer() {
  for (;;) {
    if (!requests.has_unwritten()) {
      wake_writer.expires_at(clock_type::time_point::max());
      co_await wake_writer.async_wait(use_tuple);
      if (stopping) co_return;
      continue;
    }
    if (config.write_window.count() > 0) {
      window_timer.expires_after(config.write_window);
      co_await window_timer.async_wait(use_tuple);
    }
    auto data = requests.prepare_write(config.write_limit);
    auto [ec, n] = co_await write(asio::buffer(data));
    if (ec) {
      if (!stopping) set_error(core::cat("write to Redis at ", current_address, " failed: ", ec.message()));
      co_return;
    }
  }
}

// Fails requests that got no reply within the request timeout.
asio::awaitable<void> connection::impl::expire_requests() {
  auto self = shared_from_this();
  co_await deadlines.expire_from(stopping, requests, error::request_timeout);
}

asio::awaitable<void> connection::impl::run() {
  auto self = shared_from_this();
  asio::co_spawn(strand, expire_requests(), asio::detached);
  auto backoff = config.startup_min;
  bool ever_connected = false;
  std::minstd_rand rng{std::random_device{}()};
  // What was logged last: an outage is logged once per cause (a connection lost, then the cause of the
  // reconnects failing), not once per attempt.
  std::string reported;
  while (!stopping) {
    attempt_error.clear();
    auto ec = co_await connect_once();
    if (stopping) break;
    if (ec) {
      // connect_once leaves a precise message for TLS and AUTH failures; anything else gets a generic one.
      set_error(attempt_error.empty()
                    ? core::cat("cannot connect to Redis at ", current_address, ": ", ec.message())
                    : attempt_error);
      if (auto text = last_error_text(); text != reported) {
        if (config.log_state_changes) core::log_error(text, " (retrying)");
        reported = std::move(text);
      }
      if (starting.exchange(false))
        requests.fail_all(error::not_connected);  // Redis is down: no more waiting
      auto jittered = backoff / 2 + std::chrono::milliseconds(rng() % (backoff.count() / 2 + 1));
      backoff_timer.expires_after(jittered);
      co_await backoff_timer.async_wait(use_tuple);
      backoff = std::min(backoff * 2, ever_connected ? config.reconnect_max : config.startup_max);
      continue;
    }
    ever_connected = true;
    backoff = config.reconnect_min;
    if (!reported.empty() && config.log_state_changes)
      core::log_warn("connected to Redis at ", current_address);
    reported.clear();
    set_error("");
    set_connected(true);
    starting = false;
    wake_writer.cancel();
    co_await (reader() || writer());
    if (closing_locally || stopping) closed_locally.fetch_add(1, std::memory_order_relaxed);
    closing_locally = false;
    set_connected(false);
    close();
    requests.on_disconnect(error::connection_lost);
    if (!stopping) {
      reported = last_error_text();
      if (config.log_state_changes) core::log_error(reported);
    }
  }
}

void connection::impl::exec(std::shared_ptr<pending_request> request) {
  if (stopping) return pipeline::finish(*request, error::shutting_down, {});
  if (!connected && !starting) return pipeline::finish(*request, error::not_connected, {});
  if (config.sentinel) {
    // After a failover the old master answers writes with READONLY: drop it, the next connection asks the
    // sentinels again.
    request->done = [self = shared_from_this(), inner = std::move(request->done)](
                        error_code ec, std::vector<value>&& replies) {
      for (const auto& r : replies) {
        if (r.is_error() && r.text.starts_with("READONLY")) {
          self->set_error(core::cat("Redis at ", self->current_address, " is no longer the master"));
          error_code ignored;
          self->closing_locally = true;
          self->socket.close(ignored);
          break;
        }
      }
      inner(ec, std::move(replies));
    };
  }
  deadlines.add(request, config.request_timeout);
  requests.enqueue(std::move(request));
  wake_writer.cancel();
}

void connection::impl::shutdown() {
  stopping = true;
  set_connected(false);
  requests.fail_all(error::shutting_down);
  error_code ignored;
  socket.close(ignored);
  wake_writer.cancel();
  backoff_timer.cancel();
  deadline_timer.cancel();
}

connection::connection(asio::any_io_executor ex, connection_config config)
    : impl_(std::make_shared<impl>(std::move(ex), config)), config_(std::move(config)) {}

connection::~connection() {
  stop();
}

void connection::start(state_observer observer) {
  impl_->observer = std::move(observer);
  asio::co_spawn(
      impl_->strand, [self = impl_]() { return self->run(); }, asio::detached);
}

void connection::stop() {
  if (impl_->stopping.exchange(true)) return;
  asio::post(impl_->strand, [self = impl_] { self->shutdown(); });
}

void connection::exec(std::shared_ptr<pending_request> request) {
  asio::post(impl_->strand,
             [self = impl_, request = std::move(request)]() mutable { self->exec(std::move(request)); });
}

void connection::reconnect() {
  asio::post(impl_->strand, [self = impl_] {
    error_code ignored;
    if (self->connected) {
      self->closing_locally = true;
      self->socket.close(ignored);
    }
  });
}

void connection::retry_now() {
  asio::post(impl_->strand, [self = impl_] { self->backoff_timer.cancel(); });
}

connection::counts connection::connection_counts() const {
  return {impl_->opened.load(std::memory_order_relaxed),
          impl_->closed_locally.load(std::memory_order_relaxed)};
}

bool connection::connected() const {
  return impl_->connected.load(std::memory_order_acquire);
}

bool connection::accepting() const {
  return impl_->connected.load(std::memory_order_acquire) || impl_->starting.load(std::memory_order_acquire);
}

std::string connection::last_error() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->last_error;
}

}  // namespace sluice::redis