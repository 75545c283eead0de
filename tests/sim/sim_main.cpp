// scripts/sim: the deterministic simulator's command line (README, "Development").
//   sluice_sim [--seeds N] [--hours H]        every leg, seeds 1..N (default 200), H virtual hours a seed
//   sluice_sim --seed S [--hours H] [--leg L]  one seed (a replay)
//   sluice_sim --self-check                   the known-wrong variants: each must be caught
//   --failed-seeds FILE                       seeds that once failed ("leg|seed|hours" a line): run first
// One line per leg (seeds, virtual hours, decisions, invariant checks), a failure's replay command, and
// "N passed, M failed" last; exits non-zero on any failure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "sim.hpp"

namespace sluice::sim {

leg fixed_window_leg();
leg concurrency_leg();
leg gcra_leg();

const std::vector<leg>& all_legs() {
  static const std::vector<leg> legs{fixed_window_leg(), gcra_leg(), concurrency_leg()};
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
        std::printf("caught %s in %s after %.1f virtual hours (seed %llu): %s\n", variant.c_str(),
                    l.name.c_str(), hours, static_cast<unsigned long long>(*caught), why.c_str());
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

}  // namespace

int main(int argc, char** argv) {
  sluice::core::log_init(sluice::core::log_level::error, false);
  const auto o = parse(argc, argv);
  if (o.self_check) return self_check();
  bool known = o.leg.empty();
  for (const auto& l : all_legs()) known = known || l.name == o.leg;
  if (!known) usage("no leg '" + o.leg + "'");
  int passed = 0, failed = 0;
  auto report_failure = [&](const leg& l, std::uint64_t seed, double hours, const run_result& r) {
    std::printf("FAILED %s, seed %llu: %s\n  replay: %s\n", l.name.c_str(),
                static_cast<unsigned long long>(seed), r.failure->c_str(),
                replay(l, seed, hours, "").c_str());
  };
  // Seeds that once failed go first, every time.
  for (const auto& f : read_failed(o.failed_seeds)) {
    for (const auto& l : all_legs()) {
      if (l.name != f.leg || (!o.leg.empty() && o.leg != l.name) || o.seed) continue;
      const auto r = run_one(l, {f.seed, f.hours, ""});
      if (r.failure) {
        report_failure(l, f.seed, f.hours, r);
        ++failed;
      } else {
        ++passed;
      }
    }
  }
  for (const auto& l : all_legs()) {
    if (!o.leg.empty() && o.leg != l.name) continue;
    const double hours = o.hours.value_or(l.default_hours);
    const std::uint64_t first = o.seed.value_or(1), last = o.seed.value_or(o.seeds);
    const auto started = std::chrono::steady_clock::now();
    std::uint64_t decisions = 0, checks = 0, seeds = 0, leg_failed = 0;
    double virtual_hours = 0;
    for (std::uint64_t seed = first; seed <= last; ++seed) {
      const auto r = run_one(l, {seed, hours, ""});
      ++seeds;
      decisions += r.decisions;
      checks += r.checks;
      virtual_hours += r.virtual_hours;
      if (r.failure) {
        report_failure(l, seed, hours, r);
        ++leg_failed;
      }
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("%s: %llu seeds, %.1f virtual hours, %llu decisions, %llu checks, %s (%.1f s)\n",
                l.name.c_str(), static_cast<unsigned long long>(seeds), virtual_hours,
                static_cast<unsigned long long>(decisions), static_cast<unsigned long long>(checks),
                leg_failed == 0 ? "ok" : "FAILED", wall);
    passed += leg_failed == 0 ? 1 : 0;
    failed += leg_failed == 0 ? 0 : 1;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
