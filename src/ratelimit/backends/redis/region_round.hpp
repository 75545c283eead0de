#pragma once
// What region_reader keeps per remote region and per round: shared by its two halves, the rounds' I/O
// (region_reader.cpp) and what a round's answers make of the regions' states, the gauges and the view
// (region_views.cpp). Private to them.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/backends/redis/region_reader.hpp"
#include "ratelimit/backends/redis/remote_reads.hpp"
#include "redis/store.hpp"
#include "stats/store.hpp"

namespace sluice::ratelimit::backends::redis {

struct region_reader::remote {
  std::string name;
  std::unique_ptr<sluice::redis::store> store;
  // The last good read, by slot: each key's total, how fast it grew (hits per second, smoothed over about a
  // second) and when it was read (unix ms; 0: never); when the region was last read, its heartbeat's time.
  struct key_total {
    std::uint64_t total = 0;
    double rate = 0;
    std::int64_t read_ms = 0;
  };
  std::vector<key_total> totals;
  std::int64_t read_ms = 0;
  std::int64_t heartbeat_ms = 0;
  std::int64_t round_trip_ms = 0;
  std::vector<std::string> cannot_see;  // as its fresh heartbeats say
  std::optional<bool> reachable;        // unknown until the first round ends
  std::string why;                      // why it is unreachable
  stats::gauge* reachable_gauge = nullptr;
  stats::gauge* age_gauge = nullptr;
  stats::gauge* lag_gauge = nullptr;
  stats::gauge* rtt_gauge = nullptr;
  stats::gauge* last_io_gauge = nullptr;  // the replica's own word: master_last_io_seconds_ago
};

// One round: the keys read (pointers into slot_keys_ and tracked_, which change only between rounds) and what
// came back.
struct region_reader::round_state {
  unsigned workers_left = 0;
  std::size_t regions_left = 0;
  bool finished = false;  // by its last reply or its deadline: later replies are dropped
  std::int64_t started_us = 0;
  std::vector<key_read> keys;
  struct answer {
    bool answered = false;
    bool ok = false;
    std::string error;
    region_health health;
    std::vector<std::uint64_t> totals;
    std::int64_t round_trip_ms = 0;
  };
  std::vector<answer> answers;  // per remote
  answer local;                 // this region's counts (share)
  bool reads_local = false;
};

}  // namespace sluice::ratelimit::backends::redis
