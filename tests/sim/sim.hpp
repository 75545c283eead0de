#pragma once
// The deterministic simulator's parts (scripts/sim): each leg drives the real decision code under a virtual
// clock with one workload family, checks every decision against a reference model, and reports what it ran.
// A run is fixed by its leg, seed, virtual hours and variant: the same parameters give the same lines.

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace sluice::sim {

struct run_params {
  std::uint64_t seed = 1;
  double hours = 1;
  // "" runs the real code; otherwise a known-wrong variant (self-check) that the invariants must catch.
  std::string variant;
};

struct run_result {
  std::uint64_t decisions = 0;
  std::uint64_t checks = 0;
  double virtual_hours = 0;
  std::optional<std::string> failure;  // the first invariant broken, with the virtual time and what was seen
};

struct leg {
  std::string name;          // e.g. "fixed_window memory"
  double default_hours = 1;  // per seed, in the CI run
  run_result (*run)(const run_params&);
  std::vector<std::string> variants;  // the known-wrong variants this leg must catch
  // A leg whose decisions are round trips to a real server runs fewer seeds: this many of every 200 (0: all).
  std::uint64_t max_seeds = 0;
};

const std::vector<leg>& all_legs();

// The seed's random numbers, with the helpers the workloads use.
class random {
 public:
  explicit random(std::uint64_t seed) : engine_(seed) {}
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(engine_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(engine_) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& from) {
    return from[static_cast<std::size_t>(between(0, static_cast<std::int64_t>(from.size()) - 1))];
  }

 private:
  std::mt19937_64 engine_;
};

constexpr std::int64_t ms = 1'000;
constexpr std::int64_t second = 1'000'000;
constexpr std::int64_t hour = 3600 * second;
// Virtual time starts here (2027-01-15): far from the epoch, so windows of every unit are aligned as in use.
constexpr std::int64_t start_us = 1'800'000'000 * second;

// When a run of `p` ends: its hours of virtual time after start_us.
inline std::int64_t end_of(const run_params& p) {
  return start_us + static_cast<std::int64_t>(p.hours * static_cast<double>(hour));
}

// Hits per (tenant, window start), for fixed windows of `unit_s` seconds: the windows before the one a
// decision falls in are dropped as time moves on (they are never looked at again).
class window_counts {
 public:
  explicit window_counts(std::int64_t unit_s) : unit_s_(unit_s) {}
  // The start (Unix seconds) of the window holding `now_us`; the windows before it are dropped.
  std::int64_t move_to(std::int64_t now_us) {
    const std::int64_t window = now_us / second / unit_s_ * unit_s_;
    std::erase_if(counts_, [&](const auto& kv) { return kv.first.second < window; });
    return window;
  }
  std::uint64_t& at(int tenant, std::int64_t window) { return counts_[{tenant, window}]; }

 private:
  std::int64_t unit_s_;
  std::map<std::pair<int, std::int64_t>, std::uint64_t> counts_;
};

// Records the first broken invariant; a leg stops at it.
class checker {
 public:
  // False (and the failure kept) when `ok` is false: `what` says what was expected and seen.
  template <typename... Parts>
  bool expect(bool ok, std::int64_t virtual_us, const Parts&... what) {
    ++checks_;
    if (ok || failure_) return ok;
    std::string text = "at " + std::to_string(virtual_us / 1000) + " ms of virtual time: ";
    ((text += to_text(what)), ...);
    failure_ = std::move(text);
    return false;
  }
  bool failed() const { return failure_.has_value(); }
  // What a leg ran, ended at virtual time `now_us` (decisions counted by the leg).
  run_result finish(run_result out, std::int64_t now_us) const;
  std::uint64_t checks() const { return checks_; }
  const std::optional<std::string>& failure() const { return failure_; }

 private:
  static std::string to_text(const std::string& s) { return s; }
  static std::string to_text(const char* s) { return s; }
  template <typename N>
  static std::string to_text(N n) {
    return std::to_string(n);
  }
  std::uint64_t checks_ = 0;
  std::optional<std::string> failure_;
};

inline run_result checker::finish(run_result out, std::int64_t now_us) const {
  out.checks = checks_;
  out.virtual_hours = static_cast<double>(now_us - start_us) / static_cast<double>(hour);
  out.failure = failure_;
  return out;
}

}  // namespace sluice::sim
