#pragma once
// What a Redis leg's world decides on: a redis-server of its own, and per worker a pool of one connection and
// the real Redis backend (script batcher, BITFIELD GCRA, the decide script), all on one io_context that the
// simulator runs between its steps; each backend behind an agreement_backend, which checks every op against
// one memory store.
//
// The simulator lets every command in flight land before the next decision, those a decision does not wait
// for too (a sliding window's DECRBY of hits it did not admit): the workers' connections are separate
// sockets, so otherwise which of two workers' commands Redis runs first would be up to the machine, and a run
// would not replay. The transients those commands leave (a window that looks fuller than it is until its
// take-back lands: stricter, never looser) are therefore not simulated.

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "agreement_backend.hpp"
#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/backends/redis/redis_backend.hpp"
#include "redis/pool.hpp"
#include "redis_server.hpp"

namespace sluice::sim {

class redis_stores {
 public:
  // Throws std::runtime_error when Redis cannot be started or reached.
  redis_stores(int workers, const core::clock& virtual_clock, checker& check);
  ~redis_stores();

  ratelimit::limiter::backend& backend(int worker) { return *agreements_[static_cast<std::size_t>(worker)]; }
  // Runs the io_context until `done()` and no request is left unanswered; throws std::runtime_error after 30
  // s of real time.
  void run_until(const std::function<bool()>& done);

 private:
  redis_server server_;
  boost::asio::io_context io_;
  core::fake_clock still_{start_us / second};  // the memory store's: it stands still (agreement_backend.hpp)
  ratelimit::backends::memory::memory_backend memory_;
  class quiet_store;  // a pool that counts its requests not answered yet
  std::vector<std::unique_ptr<quiet_store>> pools_;
  std::vector<std::unique_ptr<ratelimit::backends::redis::redis_backend>> backends_;
  std::vector<std::unique_ptr<agreement_backend>> agreements_;
};

}  // namespace sluice::sim
