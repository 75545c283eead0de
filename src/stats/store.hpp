#pragma once
// The stats registry shared by every module: named counters, gauges and timers, created on first use and
// never moved, so hot paths keep plain pointers to them. Sharded by name so lookups from many threads rarely
// meet on a lock. Counters and timers count into per-thread cells (stats/cells.hpp), so workers counting the
// same stat never share a cache line; their values are summed when read. Sinks (statsd, DogStatsD,
// Prometheus, stdout) read them at flush.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stats/cells.hpp"

namespace sluice::stats {

// Cumulative; sinks that want deltas (statsd) keep the last value they sent.
class counter {
 public:
  explicit counter(detail::cells& cells) : cells_(cells), cell_(cells.allocate()) {}
  void add(std::uint64_t n) { cells_.add(cell_, n); }
  void inc() { add(1); }
  std::uint64_t value() const { return cells_.sum(cell_); }

 private:
  detail::cells& cells_;
  const std::size_t cell_;
};

class gauge {
 public:
  void set(std::int64_t v) {
    value_.store(v, std::memory_order_relaxed);
    shown_.store(true, std::memory_order_relaxed);
  }
  void add(std::int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::int64_t value() const { return value_.load(std::memory_order_relaxed); }
  // Leaves the sinks and pages until the next set(): what it measured is gone (a removed rule's limit). It
  // stays in the store, as whoever holds it keeps a plain pointer.
  void hide() { shown_.store(false, std::memory_order_relaxed); }
  bool shown() const { return shown_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
  std::atomic<bool> shown_{true};
};

class timer;

// What the active sink does with each timer observation (statsd sends each one, Prometheus buckets them).
// At most one sink is active, as upstream allows.
class timer_observer {
 public:
  virtual ~timer_observer() = default;
  virtual void observe(timer& t, double milliseconds) = 0;
};

// Durations in milliseconds, as upstream's timers. Keeps a count and a sum itself; everything else is the
// active sink's business.
class timer {
 public:
  timer(std::string name, const std::atomic<timer_observer*>& observer, detail::cells& cells)
      : name_(std::move(name)),
        observer_(observer),
        cells_(cells),
        count_cell_(cells.allocate()),
        sum_micros_cell_(cells.allocate()) {}
  void record(double milliseconds) {
    cells_.add(count_cell_, 1);
    cells_.add(sum_micros_cell_, static_cast<std::uint64_t>(milliseconds * 1000.0));
    if (auto* o = observer_.load(std::memory_order_acquire)) o->observe(*this, milliseconds);
  }
  // The time from `start` to now.
  void record_since(std::chrono::steady_clock::time_point start) {
    record(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  const std::string& name() const { return name_; }
  std::uint64_t count() const { return cells_.sum(count_cell_); }
  double sum_milliseconds() const { return static_cast<double>(cells_.sum(sum_micros_cell_)) / 1000.0; }
  // Per-timer state owned by the active sink (set once, under the sink's own lock).
  std::atomic<void*> sink_state{nullptr};

 private:
  std::string name_;
  const std::atomic<timer_observer*>& observer_;
  detail::cells& cells_;
  const std::size_t count_cell_;
  const std::size_t sum_micros_cell_;
};

class store {
 public:
  // `max_dynamic_series` bounds the stats created through the *_bounded calls (names built from request
  // values: detailed_metric, value_to_metric, overrides, unknown domains), so no client can grow memory
  // without limit.
  explicit store(std::size_t max_dynamic_series = 10'000) : max_dynamic_(max_dynamic_series) {}

  // Returns the stat with this full name (e.g. "ratelimit.service.config_load_success"), creating it.
  counter& get_counter(std::string_view name);
  gauge& get_gauge(std::string_view name);
  timer& get_timer(std::string_view name);
  // As get_counter, but once the dynamic series are at their bound a name not seen yet gets `overflow_name`
  // instead (a regular, unbounded series).
  counter& get_counter_bounded(std::string_view name, std::string_view overflow_name);
  std::size_t dynamic_series() const { return dynamic_.load(std::memory_order_relaxed); }
  std::size_t max_dynamic_series() const { return max_dynamic_; }

  // Gauges whose values are computed, not counted (pool sizes, cache entries): run before every read.
  void add_generator(std::function<void()> generate);
  void run_generators();

  // Every stat, in no particular order (gauges: the shown ones). Visitors must not create stats.
  void for_each_counter(const std::function<void(const std::string&, const counter&)>& visit) const;
  void for_each_gauge(const std::function<void(const std::string&, const gauge&)>& visit) const;
  void for_each_timer(const std::function<void(const std::string&, timer&)>& visit);

  void set_timer_observer(timer_observer* observer) { observer_.store(observer, std::memory_order_release); }

 private:
  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename T>
  using table = std::unordered_map<std::string, std::unique_ptr<T>, string_hash, std::equal_to<>>;
  struct shard {
    mutable std::mutex mutex;
    table<counter> counters;
    table<gauge> gauges;
    table<timer> timers;
  };
  static constexpr std::size_t shard_count = 16;
  shard& shard_of(std::string_view name) {
    return shards_[std::hash<std::string_view>{}(name) % shard_count];
  }

  detail::cells cells_;  // before the stats that count into it
  std::array<shard, shard_count> shards_;
  const std::size_t max_dynamic_;
  std::atomic<std::size_t> dynamic_{0};
  std::atomic<timer_observer*> observer_{nullptr};
  std::mutex generators_mutex_;
  std::vector<std::function<void()>> generators_;
};

// upstream's SanitizeStatName: ':' and '|' would break the statsd line format, so they become '_'; so do the
// dots of an IPv4 address, which would otherwise split one name into several levels.
std::string sanitize_stat_name(std::string_view name);

// A part of a stat name that is one level whatever it holds (a value_regex pattern): its dots are written as
// "\u2024" (ONE DOT LEADER), at which neither statsd's tools nor the Prometheus mapping split levels; the
// Prometheus labels show them as dots again (dots_restored).
inline constexpr std::string_view level_dot = "\u2024";
std::string one_level(std::string_view part);
std::string dots_restored(std::string_view text);

}  // namespace sluice::stats
