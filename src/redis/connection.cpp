#include "redis/connection_impl.hpp"

namespace sluice::redis {

void connection::impl::exec(std::shared_ptr<pending_request> request) {
  if (config.sentinel && !link.stopping) {
    // After a failover the old master answers writes with READONLY: drop it, the next connection asks the
    // sentinels again.
    request->done = [self = shared_from_this(), inner = std::move(request->done)](
                        error_code ec, std::vector<value>&& replies) {
      for (const auto& r : replies) {
        if (r.is_error() && r.text.starts_with("READONLY")) {
          self->link.set_error(core::cat("Redis at ", self->current_address, " is no longer the master"));
          self->link.drop();
          break;
        }
      }
      inner(ec, std::move(replies));
    };
  }
  link.enqueue(std::move(request));
}

connection::connection(asio::any_io_executor ex, connection_config config)
    : impl_(std::make_shared<impl>(std::move(ex), config)), config_(std::move(config)) {}

connection::~connection() {
  stop();
}

void connection::start(state_observer observer) {
  impl_->link.observer = std::move(observer);
  asio::co_spawn(
      impl_->strand, [self = impl_]() { return self->link.run(*self, self); }, asio::detached);
}

void connection::stop() {
  if (impl_->link.stopping.exchange(true)) return;
  asio::post(impl_->strand, [self = impl_] { self->link.shutdown(); });
}

void connection::exec(std::shared_ptr<pending_request> request) {
  asio::post(impl_->strand,
             [self = impl_, request = std::move(request)]() mutable { self->exec(std::move(request)); });
}

void connection::reconnect() {
  asio::post(impl_->strand, [self = impl_] {
    if (self->link.connected) self->link.drop();
  });
}

void connection::retry_now() {
  asio::post(impl_->strand, [self = impl_] { self->link.backoff_timer.cancel(); });
}

connection::counts connection::connection_counts() const {
  return {impl_->link.opened.load(std::memory_order_relaxed),
          impl_->link.closed_locally.load(std::memory_order_relaxed)};
}

bool connection::connected() const {
  return impl_->link.connected.load(std::memory_order_acquire);
}

bool connection::accepting() const {
  return impl_->link.accepting();
}

std::string connection::last_error() const {
  return impl_->link.last_error();
}

}  // namespace sluice::redis
