#include "core/workers.hpp"

#include <sched.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

#include "core/log.hpp"

namespace sluice::core {

unsigned cpus_of_quota(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  unsigned long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period == 0) return 0;
  unsigned long long q = 0;
  auto [ptr, ec] = std::from_chars(quota.data(), quota.data() + quota.size(), q);
  if (ec != std::errc{} || ptr != quota.data() + quota.size() || q == 0) return 0;
  return static_cast<unsigned>((q + period - 1) / period);
}

unsigned usable_cpus() {
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = std::max(1, CPU_COUNT(&set));
  std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
  std::string text;
  if (cpu_max && std::getline(cpu_max, text)) {
    if (unsigned quota = cpus_of_quota(text); quota > 0) cpus = std::min(cpus, quota);
  }
  return cpus;
}

worker_pool::worker_pool(unsigned count) {
  for (unsigned i = 0; i < std::max(count, 1u); ++i) workers_.push_back(std::make_unique<worker>());
}

worker_pool::~worker_pool() {
  stop();
}

void worker_pool::start() {
  for (auto& w : workers_) {
    running_.fetch_add(1, std::memory_order_acq_rel);
    w->thread = std::thread([this, &ioc = w->ioc] {
      try {
        ioc.run();
      } catch (const std::exception& e) {
        log_error("worker stopped by an exception: ", e.what());
      }
      running_.fetch_sub(1, std::memory_order_acq_rel);
    });
  }
}

void worker_pool::release() {
  accepting_.store(false, std::memory_order_release);
  for (auto& w : workers_) w->guard.reset();
}

void worker_pool::stop() {
  accepting_.store(false, std::memory_order_release);
  for (auto& w : workers_) w->ioc.stop();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

}  // namespace sluice::core
