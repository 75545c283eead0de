// scripts/sim: the deterministic simulator's command line (docs/development.md).
//   sluice_sim [--seeds N] [--hours H]        every leg, seeds 1..N (default 200), H virtual hours a seed
//   sluice_sim --seed S [--hours H] [--leg L]  one seed (a replay)
//   sluice_sim --self-check                   the known-wrong variants: each must be caught
//   --failed-seeds FILE                       seeds that once failed ("leg|seed|hours" a line): run first
// One line per leg (seeds, virtual hours, decisions, invariant checks), a failure's replay command, and
// "N passed, M failed" last; exits non-zero on any failure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "sim.hpp"

namespace sluice::sim {

leg fixed_window_leg();
leg fixed_window_redis_leg();
leg concurrency_leg();
leg concurrency_redis_leg();
leg gcra_leg();
leg gcra_redis_leg();
leg sliding_window_leg();
leg sliding_window_redis_leg();
leg calendar_leg();
leg snapshot_leg();
leg limit_table_leg();
leg rlqs_leg();
leg rlqs_replicas_leg();
leg synced_leg();
leg regions_leg();

const std::vector<leg>& all_legs() {
  static const std::vector<leg> legs{fixed_window_leg(),
                                     sliding_window_leg(),
                                     gcra_leg(),
                                     concurrency_leg(),
                                     fixed_window_redis_leg(),
                                     sliding_window_redis_leg(),
                                     gcra_redis_leg(),
                                     concurrency_redis_leg(),
                                     rlqs_leg(),
                                     rlqs_replicas_leg(),
                                     synced_leg(),
                                     regions_leg(),
                                     calendar_leg(),
                                     snapshot_leg(),
                                     limit_table_leg()};
  return legs;
}

}  // namespace sluice::sim

namespace {

using namespace sluice::sim;

struct options {
  std::uint64_t seeds = 200;
  std::optional<std::uint64_t> seed;
  std::optional<double> hours;
  std::string leg;
  std::string failed_seeds;
  bool self_check = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sluice_sim: %s\nusage: sluice_sim [--seeds N | --seed S] [--hours H] [--leg NAME] "
               "[--self-check] [--failed-seeds FILE]\n",
               why.c_str());
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--seeds")
        o.seeds = std::stoull(value());
      else if (a == "--seed")
        o.seed = std::stoull(value());
      else if (a == "--hours")
        o.hours = std::stod(value());
      else if (a == "--leg")
        o.leg = value();
      else if (a == "--failed-seeds")
        o.failed_seeds = value();
      else if (a == "--self-check")
        o.self_check = true;
      else
        usage("unknown argument '" + a + "'");
    } catch (const std::logic_error&) {
      usage("not a number after " + a);
    }
  }
  if (o.hours && !(*o.hours > 0)) usage("--hours must be above 0");
  return o;
}

std::string quoted(const std::string& leg) {
  return "'" + leg + "'";
}

std::string replay(const leg& l, std::uint64_t seed, double hours, const std::string& variant) {
  std::string command = "scripts/sim --leg " + quoted(l.name) + " --seed " + std::to_string(seed) +
                        " --hours " + std::to_string(hours);
  if (!variant.empty()) command += "  (variant '" + variant + "')";
  return command;
}

std::string failure_text(const leg& l, std::uint64_t seed, double hours, const run_result& r) {
  return "FAILED " + l.name + ", seed " + std::to_string(seed) + ": " + *r.failure +
         "\n  replay: " + replay(l, seed, hours, "") + "\n";
}

run_result run_one(const leg& l, const run_params& p) {
  try {
    return l.run(p);
  } catch (const std::exception& e) {
    run_result r;
    r.failure = std::string("stopped: ") + e.what();
    return r;
  }
}

struct failed_seed {
  std::string leg;
  std::uint64_t seed;
  double hours;
};

std::vector<failed_seed> read_failed(const std::string& path) {
  std::vector<failed_seed> out;
  if (path.empty()) return out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto a = line.find('|'), b = line.rfind('|');
    if (a == std::string::npos || a == b) usage(path + ": not 'leg|seed|hours': " + line);
    out.push_back(
        {line.substr(0, a), std::stoull(line.substr(a + 1, b - a - 1)), std::stod(line.substr(b + 1))});
  }
  return out;
}

int self_check() {
  int passed = 0, failed = 0;
  for (const auto& l : all_legs()) {
    for (const auto& variant : l.variants) {
      double hours = 0;
      std::optional<std::uint64_t> caught;
      std::string why;
      for (std::uint64_t seed = 1; seed <= 50 && !caught; ++seed) {
        const auto r = run_one(l, {seed, l.default_hours, variant});
        hours += r.virtual_hours;
        if (r.failure) {
          caught = seed;
          why = *r.failure;
        }
      }
      if (caught) {
        std::printf("caught %s after %.1f virtual hours (seed %llu), in %s: %s\n", variant.c_str(), hours,
                    static_cast<unsigned long long>(*caught), l.name.c_str(), why.c_str());
        ++passed;
      } else {
        std::printf("MISSED %s in %s over %.1f virtual hours\n", variant.c_str(), l.name.c_str(), hours);
        ++failed;
      }
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

struct leg_report {
  std::string text;  // its failures, then its line
  bool failed = false;
};

leg_report run_leg(const leg& l, std::uint64_t first, std::uint64_t last, double hours) {
  leg_report report;
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t decisions = 0, checks = 0, seeds = 0;
  double virtual_hours = 0;
  for (std::uint64_t seed = first; seed <= last; ++seed) {
    const auto r = run_one(l, {seed, hours, ""});
    ++seeds;
    decisions += r.decisions;
    checks += r.checks;
    virtual_hours += r.virtual_hours;
    if (r.failure) {
      report.text += failure_text(l, seed, hours, r);
      report.failed = true;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char line[512];
  std::snprintf(line, sizeof line,
                "%s: %llu seeds, %.1f virtual hours, %llu decisions, %llu checks, %s (%.1f s)\n",
                l.name.c_str(), static_cast<unsigned long long>(seeds), virtual_hours,
                static_cast<unsigned long long>(decisions), static_cast<unsigned long long>(checks),
                report.failed ? "FAILED" : "ok", wall);
  report.text += line;
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  // The faults the legs inject (outages, partitions) are logged by the product as errors, thousands a run:
  // the checkers report what matters.
  sluice::core::log_init(sluice::core::log_level::fatal, false);
  const auto o = parse(argc, argv);
  if (o.self_check) return self_check();
  bool known = o.leg.empty();
  for (const auto& l : all_legs()) known = known || l.name == o.leg;
  if (!known) usage("no leg '" + o.leg + "'");
  int passed = 0, failed = 0;
  // Seeds that once failed go first, every time.
  for (const auto& f : read_failed(o.failed_seeds)) {
    for (const auto& l : all_legs()) {
      if (l.name != f.leg || (!o.leg.empty() && o.leg != l.name) || o.seed) continue;
      const auto r = run_one(l, {f.seed, f.hours, ""});
      if (r.failure) {
        std::fputs(failure_text(l, f.seed, f.hours, r).c_str(), stdout);
        ++failed;
      } else {
        ++passed;
      }
    }
  }
  // A leg of round trips runs its share of the seeds (leg::max_seeds), at least one.
  auto last_seed = [&](const leg& l) -> std::uint64_t {
    if (o.seed) return *o.seed;
    return l.max_seeds == 0 ? o.seeds : std::max<std::uint64_t>(1, o.seeds * l.max_seeds / 200);
  };
  // The legs run side by side (each on a thread of its own: they share nothing); their lines print in order.
  std::vector<std::future<leg_report>> reports;
  for (const auto& l : all_legs()) {
    if (!o.leg.empty() && o.leg != l.name) continue;
    reports.push_back(std::async(std::launch::async, run_leg, std::cref(l), o.seed.value_or(1), last_seed(l),
                                 o.hours.value_or(l.default_hours)));
  }
  for (auto& r : reports) {
    const auto report = r.get();
    std::fputs(report.text.c_str(), stdout);
    passed += report.failed ? 0 : 1;
    failed += report.failed ? 1 : 0;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
