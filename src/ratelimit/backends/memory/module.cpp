#include "ratelimit/backends/memory/module.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>

#include "core/counted.hpp"
#include "core/log.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"
#include "ratelimit/backends/memory/snapshot_file.hpp"

namespace sluice::ratelimit::backends::memory {

namespace asio = boost::asio;

namespace {

// Sweeps expired counters a few shards at a time, so no sweep holds up requests for long.
asio::awaitable<void> sweep_loop(memory_backend& backend, asio::steady_timer& timer, const bool& stopped) {
  for (;;) {
    timer.expires_after(std::chrono::milliseconds(250));
    auto [ec] = co_await timer.async_wait(core::use_tuple);
    // A stop may come after the wait ended but before this ran: the flag, not the cancel, ends the loop.
    if (ec || stopped) co_return;
    backend.sweep(memory_backend::shard_count / 8);
  }
}

// MEMORY_SNAPSHOT_INTERVAL: the counters written every interval, so a crash loses at most one interval's.
// The writes keep to a fixed rate (each deadline one interval after the last, not after the last write
// ended), so a write's own time does not stretch the gap; one that took longer than an interval is followed
// at once.
asio::awaitable<void> snapshot_loop(asio::steady_timer& timer, std::chrono::milliseconds interval,
                                    const bool& stopped, std::function<void()> write) {
  auto deadline = std::chrono::steady_clock::now() + interval;
  for (;;) {
    timer.expires_at(deadline);
    auto [ec] = co_await timer.async_wait(core::use_tuple);
    if (ec || stopped) co_return;
    write();
    deadline = std::max(deadline + interval, std::chrono::steady_clock::now());
  }
}

}  // namespace

memory_module::memory_module(const memory_settings& settings, const start_context& context)
    : module(context.workers.size()),
      settings_(settings),
      clock_(context.clock),
      backend_(std::make_unique<memory_backend>(context.clock, settings.max_counters)),
      sweep_timer_(context.control),
      snapshot_timer_(context.control) {
  if (!settings_.snapshot_file.empty()) restore();
  asio::co_spawn(context.control, sweep_loop(*backend_, sweep_timer_, stopped_), asio::detached);
  if (!settings_.snapshot_file.empty() && settings_.snapshot_interval.count() > 0) {
    asio::co_spawn(context.control,
                   snapshot_loop(snapshot_timer_, settings_.snapshot_interval, stopped_,
                                 [this] { write_snapshot(false); }),
                   asio::detached);
  }
}

// MEMORY_SNAPSHOT_FILE: its folder must take files (else the start stops), and the counters it holds come
// back.
void memory_module::restore() {
  const auto& file = settings_.snapshot_file;
  if (auto error = check_snapshot_folder(file))
    throw core::settings_error(core::cat("MEMORY_SNAPSHOT_FILE: ", *error));
  const auto restored = restore_snapshot(*backend_, file, clock_.now_seconds());
  if (restored.error) {
    core::log_warn("MEMORY_SNAPSHOT_FILE ", file, " cannot be read: ", *restored.error,
                   "; starting with no counters (the next write replaces it)");
  } else if (!restored.missing) {
    core::log_info("restored ", core::counted(restored.result.counters, "counter", "counters"), " from ",
                   file, " (", restored.result.dropped, " dropped: their windows had ended) in ",
                   static_cast<std::int64_t>(restored.result.milliseconds), " ms");
  }
}

void memory_module::write_snapshot(bool final) const {
  if (settings_.snapshot_file.empty()) return;
  try {
    const auto wrote = memory::write_snapshot(*backend_, settings_.snapshot_file, clock_.now_seconds());
    const auto line =
        core::cat("wrote ", core::counted(wrote.counters, "counter", "counters"), " to ",
                  settings_.snapshot_file, " in ", static_cast<std::int64_t>(wrote.milliseconds), " ms");
    // Every interval would fill an info log; the one at stop says what the next start will find.
    if (final) {
      core::log_info(line);
    } else {
      core::log_debug(line);
    }
  } catch (const std::exception& e) {
    core::log_error("MEMORY_SNAPSHOT_FILE: ", e.what());
  }
}

// Writes the snapshot last: the requests in flight have finished.
void memory_module::stop() {
  stopped_ = true;
  sweep_timer_.cancel();
  snapshot_timer_.cancel();
  write_snapshot(true);
}

}  // namespace sluice::ratelimit::backends::memory
