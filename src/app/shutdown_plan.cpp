#include "shutdown_plan.hpp"

#include <boost/asio/post.hpp>

namespace sluice {

namespace asio = boost::asio;

namespace {

// Polls (on the control thread) until `drained` or the deadline, then runs `then`.
void wait_for_drain(asio::steady_timer& timer, std::chrono::steady_clock::time_point deadline,
                    std::function<bool()> drained, std::function<void()> then) {
  if (drained() || std::chrono::steady_clock::now() >= deadline) return then();
  timer.expires_after(std::chrono::milliseconds(20));
  timer.async_wait([&timer, deadline, drained = std::move(drained),
                    then = std::move(then)](const boost::system::error_code& ec) mutable {
    if (!ec) wait_for_drain(timer, deadline, std::move(drained), std::move(then));
  });
}

}  // namespace

void shutdown_plan::begin() {
  asio::post(control, [this] {
    if (std::exchange(stopping, true)) return;
    health.set(sigterm_component, false);
    for (auto& w : apis) w.http->stop();
    listeners.stop();
    rules.stop();
    tables.stop();  // its folder's watch, which would keep the control loop running
    if (xds) xds->stop();
    shared.stop();
    grpc.drain(grace);
    wait_for_drain(
        timer, std::chrono::steady_clock::now() + grace + std::chrono::seconds(1),
        [this] { return grpc.open_connections() == 0 && open_http(apis) == 0; },
        [this] {
          stop_quota(apis);
          demand.stop();
          // REDIS_SYNC_INTERVAL: the hits not sent yet go out first, within the grace again (1 s at least).
          drain_timer.expires_after(std::max<std::chrono::milliseconds>(grace, std::chrono::seconds(1)));
          drain_timer.async_wait([this](const boost::system::error_code& ec) {
            if (!ec) finish();
          });
          backend.drain([this] { finish(); });
        });
  });
}

void shutdown_plan::finish() {
  if (std::exchange(finished, true)) return;
  drain_timer.cancel();
  backend.stop();
  tracing.stop();  // what is queued goes out once more
  workers.release();
  release_control();
}

}  // namespace sluice
