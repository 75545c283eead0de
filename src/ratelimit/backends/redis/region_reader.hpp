#pragma once
// Several regions (docs/guides/regions.md): on the control thread, every REDIS_REMOTE_SYNC_INTERVAL,
// - gathers the keys the workers used that are not read yet (their regional_backend lists them) and drops the
//   keys whose windows ended (concurrency keys: not used for a lease);
// - writes this instance's heartbeat into its region's Redis: when, and which remote regions it can read;
// - sends each remote region's Redis one pipelined request (remote_reads.hpp): its replica state, its
//   heartbeat and the tracked keys' totals (with REDIS_REMOTE_COLD_INTERVAL, but those that can_wait);
// - once every region has answered or failed (or the round's deadline of two intervals has passed),
//   builds one remote_view — per key, the remote regions' totals summed, or what REDIS_REMOTE_FALLBACK
//   leaves while one is unreachable — and gives it to every worker.
// A region is unreachable when its read fails, its replica's link is down, or what it holds is older than
// REDIS_REMOTE_MAX_LAG; that is logged once, and its recovery too. Gauges per region:
// ratelimit.redis_region.<region>.{reachable,totals_age_ms,replication_lag_ms,round_trip_ms,
// replica_last_io_seconds}; and ratelimit.redis_region.{keys,sharing,worst_overshoot},
// ratelimit.service.rate_limit.<rule>.region_overshoot: the most a window may admit past its limit at the
// rates last seen (set_overshoot). The rounds' I/O is region_reader.cpp; what their answers make,
// region_views.cpp.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/redis/region_settings.hpp"
#include "ratelimit/backends/redis/regional_backend.hpp"
#include "ratelimit/backends/redis/remote_reads.hpp"
#include "redis/store.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::backends::redis {

class region_reader {
 public:
  // How the reader reaches the workers: `collect(deliver)` has each worker's new keys handed to `deliver` on
  // the control thread; `publish(view)` gives every worker the view.
  using deliver_fn = std::function<void(regional_backend::new_keys)>;
  struct workers_link {
    unsigned count = 0;  // deliver is called once per worker, with its keys (maybe none)
    std::function<void(deliver_fn)> collect;
    std::function<void(remote_view_ptr)> publish;
  };
  // `local`: a connection to this region's own Redis (the heartbeat, and this region's counts for `share`);
  // `remotes`: one per remote region, in settings.remotes' order.
  region_reader(const region_settings& settings, std::unique_ptr<sluice::redis::store> local,
                std::vector<std::unique_ptr<sluice::redis::store>> remotes,
                boost::asio::any_io_executor control, const core::clock& clock, stats::store& stats,
                workers_link workers);
  ~region_reader();

  void start();
  void stop();
  // One round now (tests call it in their own time).
  void round();

 private:
  struct remote;
  struct round_state;
  void schedule();
  void send_reads(const std::shared_ptr<round_state>& round);
  void write_heartbeat(const std::shared_ptr<round_state>& round);
  void merge(regional_backend::new_keys keys);
  void prune(std::int64_t now_us);
  void read_region(std::size_t r, const std::shared_ptr<round_state>& round);
  void finish(round_state& round);
  void set_reachable(remote& region, bool reachable, const std::string& why);
  void set_overshoot(const round_state& round);
  remote_view_ptr build_view(std::int64_t now_us);
  void gather_local(std::uint32_t slot, std::int64_t now_ms);
  bool can_wait(const tracked_key& how, std::int64_t now_ms) const;
  static double smoothed_rate(double rate, std::uint64_t now, std::uint64_t before, std::int64_t ms);
  std::int64_t unix_ms() const { return clock_.now_micros() / 1000; }

  region_settings settings_;
  std::unique_ptr<sluice::redis::store> local_;
  std::vector<std::unique_ptr<remote>> remotes_;
  const core::clock& clock_;
  stats::store& stats_;
  workers_link workers_;
  boost::asio::steady_timer timer_;        // the next round
  boost::asio::steady_timer deadline_;     // the round in flight's
  std::string instance_;                   // this instance's heartbeat field
  std::string own_heartbeat_;              // this region's heartbeat key
  std::vector<std::string> stale_fields_;  // of instances gone for long: deleted next round
  // The keys read each round, by slot (the rounds walk them in order: a vector, not the index's nodes):
  // slot_keys_ holds each one's key (null: a free slot), and index_ finds a key's slot by a view into it.
  boost::unordered_flat_map<std::string_view, std::uint32_t, transparent_hash, std::equal_to<>> index_;
  std::vector<tracked_key> tracked_;
  std::vector<shared_key> slot_keys_;
  std::uint32_t slot_count_ = 0;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::pair<shared_key, std::uint32_t>> added_;  // since the last view
  std::vector<shared_key> removed_;                          // since the last view
  remote_view_ptr view_;                                     // the last view given to the workers
  remote_view_ptr previous_view_;                            // the one before
  std::shared_ptr<round_state> in_flight_;
  bool stopped_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // gone with the reader: late deliveries see it
  // REDIS_REMOTE_FALLBACK=share: while a partition is known, per key what the other regions are taken to hold
  // (fixed when the partition was first seen, or when the key was first seen during it).
  bool sharing_ = false;
  std::int64_t sharing_since_us_ = 0;
  static constexpr std::uint64_t unshared = UINT64_MAX;
  std::vector<std::uint64_t> shared_;        // by slot; unshared: not fixed yet
  std::vector<std::uint64_t> local_counts_;  // by slot: this region's, as last read (share)
  // REDIS_REMOTE_COLD_INTERVAL, by slot: this region's count as the workers last reported it, and its rate.
  struct local_growth {
    double rate = 0;
    std::int64_t read_ms = 0;
  };
  std::vector<std::uint64_t> local_seen_;
  std::vector<local_growth> local_growth_;
  stats::gauge& worst_overshoot_;
  stats::gauge& sharing_gauge_;
  stats::gauge& keys_gauge_;
  stats::gauge& keys_read_gauge_;
  std::map<std::string, stats::gauge*, std::less<>> rule_overshoot_;  // per rule's stats key
};

}  // namespace sluice::ratelimit::backends::redis
