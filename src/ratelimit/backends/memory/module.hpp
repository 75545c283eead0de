#pragma once
// BACKEND_TYPE=memory as a module (backends/module.hpp): one store shared by every worker (so counts are
// exact), its sweep of expired counters, and MEMORY_SNAPSHOT_FILE (restored at start, written every
// MEMORY_SNAPSHOT_INTERVAL and at stop).

#include <boost/asio/steady_timer.hpp>
#include <memory>

#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/backends/memory/settings.hpp"
#include "ratelimit/backends/module.hpp"

namespace sluice::ratelimit::backends::memory {

class memory_module final : public module {
 public:
  // Throws core::settings_error when MEMORY_SNAPSHOT_FILE's folder cannot take files.
  memory_module(const memory_settings& settings, const start_context& context);

  limiter::backend& backend(unsigned) override { return *backend_; }
  void stop() override;

 private:
  void restore();
  // Logs what it wrote (at info when `final`, the write at stop; at debug every interval) or why it could
  // not.
  void write_snapshot(bool final) const;

  memory_settings settings_;
  const core::clock& clock_;
  std::unique_ptr<memory_backend>
      backend_;  // shared by the workers: its shards are locked (memory_backend.hpp)
  boost::asio::steady_timer sweep_timer_;
  boost::asio::steady_timer snapshot_timer_;
  bool stopped_ = false;  // on the control thread
};

}  // namespace sluice::ratelimit::backends::memory
