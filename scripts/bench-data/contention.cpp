// scripts/bench contention: the shared part of the decision path under two threads. Each thread plays a
// worker: its own rate_limit_service and rules pointer, sharing what workers share (the limiter, the memory
// backend, the stats store and the rule snapshot), deciding on keys no other thread uses (1,000 each). Prints
// the best rate of one thread and of two over alternating rounds, and their ratio (ideal: 2.0 on two free
// cores). Usage: bench_contention [seconds, all rounds together] [rounds]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/config/yaml_loader.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/service.hpp"
#include "stats/store.hpp"

using namespace sluice;

namespace {

constexpr auto rules_yaml = R"(domain: bench
descriptors:
  - key: client
    rate_limit:
      unit: hour
      requests_per_unit: 4000000000
)";

struct shared_path {
  core::system_clock clock;
  stats::store stats;
  ratelimit::backends::memory::memory_backend backend{clock, 10'000'000};
  ratelimit::limiter::limiter limiter{{}, clock};
  std::shared_ptr<const ratelimit::config::rule_set> rules;

  shared_path() {
    std::vector<ratelimit::config::config_file> files{{"bench.yaml", rules_yaml}};
    rules = ratelimit::config::load_rules(files, false, stats).rules;
    if (!rules) std::abort();
  }
};

// Decisions per second of `threads` threads for `seconds`.
double run(shared_path& shared, unsigned threads, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      // BENCH_OWN_BACKEND=1: a memory backend per thread, to tell its sharing apart from the rest.
      std::unique_ptr<ratelimit::backends::memory::memory_backend> own;
      if (std::getenv("BENCH_OWN_BACKEND"))
        own = std::make_unique<ratelimit::backends::memory::memory_backend>(shared.clock, 1'000'000);
      auto& backend = own ? *own : shared.backend;
      ratelimit::service::rate_limit_service service({}, shared.limiter, backend, shared.stats);
      service.set_rules(shared.rules);
      ratelimit::service::rls_request request;
      ratelimit::service::rls_response response;
      request.set_domain("bench");
      auto* entry = request.add_descriptors()->add_entries();
      entry->set_key("client");
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        entry->set_value("t" + std::to_string(t) + "-" + std::to_string(n % 1000));
        response.Clear();
        service.should_rate_limit(request, response, [](const ratelimit::service::service_error*) {});
        ++n;
      }
      total += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  return static_cast<double>(total) / seconds;
}

}  // namespace

// This VM's vCPUs change speed from moment to moment (the second one at times slowed by a third or more),
// more than the effect measured: one and two threads are run alternately, `rounds` times, and the best of
// each compared.
int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 10;
  shared_path shared;
  run(shared, 2, 0.5);  // warm up: both threads' counters and tables created
  std::vector<double> one;
  std::vector<double> two;
  for (int r = 0; r < rounds; ++r) {
    one.push_back(run(shared, 1, seconds / rounds));
    two.push_back(run(shared, 2, seconds / rounds));
    std::printf("round %d: 1 thread %.0f/s, 2 threads %.0f/s\n", r + 1, one.back(), two.back());
  }
  std::ranges::sort(one);
  std::ranges::sort(two);
  const double median_ratio = two[two.size() / 2] / one[one.size() / 2];
  std::printf("best of %d: 1 thread %.0f decisions/s, 2 threads %.0f decisions/s (median ratio %.2f)\n",
              rounds, one.back(), two.back(), median_ratio);
  std::printf("ratio: %.2f\n", two.back() / one.back());
  return 0;
}
