#pragma once
// The recent history behind the dashboard's small time series: on each sample() the rules' counters
// (ratelimit.service.rate_limit.<key>.{total_hits,over_limit,near_limit}) and a few named totals are read and
// their rates since the previous sample kept, the last `points` of them per key. Runs on one thread (the
// control thread samples and the debug listener reads there); reading the store never blocks a worker.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stats/store.hpp"

namespace sluice::stats {

class series_history {
 public:
  // `watched`: counter names whose rates are kept as totals (e.g. backend errors); `timers`: timers whose
  // mean per sample, over all of them, is kept (decision latency over gRPC and /json).
  series_history(store& s, std::vector<std::string> watched, std::vector<std::string> timers,
                 std::size_t points = 120, std::size_t max_keys = 500);

  // `wall_seconds` (unix time) labels the sample; rates are per second of `steady_seconds` (a clock that
  // never steps). A key first seen gives a baseline, and its rates start with the next sample. With max_keys
  // keys held, a new key takes the place of one idle for the whole history, or is not followed.
  void sample(double wall_seconds, double steady_seconds);

  struct rule_series {
    std::string key;                                  // the stats key, "<domain>.<path>"
    std::vector<float> hits, over_limit, near_limit;  // per second, oldest first
  };
  // The sample times (unix seconds), oldest first; each series has one value per time.
  std::vector<double> times() const;
  // Every tracked key's series.
  std::vector<rule_series> rules() const;
  // The rates of a watched counter, oldest first (empty when not watched).
  std::vector<float> total(std::string_view counter) const;
  // The timers' mean per sample, in milliseconds (0 where nothing was recorded).
  std::vector<float> timer_mean_ms() const;
  // Keys seen at the last sample but not followed: max_keys were, none idle.
  std::size_t untracked_keys() const { return untracked_; }

 private:
  struct track {
    std::uint64_t last = 0;    // cumulative value at the previous sample
    bool seen = false;         // `last` is a value read (not the initial 0)
    std::vector<float> rates;  // ring of points
  };
  struct rule_track {
    track hits, over_limit, near_limit;
    std::size_t since = 0;  // samples_taken_ when it was first followed
  };
  // A ring's points, oldest first.
  template <typename T>
  std::vector<T> ordered(const std::vector<T>& ring) const {
    std::vector<T> out;
    out.reserve(samples_);
    for (std::size_t i = 0; i < samples_; ++i)
      out.push_back(ring[(head_ + points_ - samples_ + i) % points_]);
    return out;
  }
  bool idle(const rule_track& r) const;
  void step(track& t, std::uint64_t value, double seconds);

  store& store_;
  std::size_t points_;
  std::size_t max_keys_;
  std::size_t head_ = 0;     // ring index of the next sample
  std::size_t samples_ = 0;  // rates recorded (at most points_)
  std::size_t samples_taken_ = 0;
  bool first_ = true;
  double last_time_ = 0;
  std::vector<double> times_;
  std::unordered_map<std::string, rule_track> rules_;
  struct watched_counter {
    const counter* source;
    track rates;
  };
  std::unordered_map<std::string, watched_counter> watched_;
  std::vector<timer*> timers_;
  track timer_count_, timer_sum_;  // the sum in microseconds
  std::vector<float> timer_mean_;
  std::size_t untracked_ = 0;
};

}  // namespace sluice::stats
