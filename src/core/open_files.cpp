#include "core/open_files.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>

namespace sluice::core {

namespace {

// The kernel's ceiling for RLIMIT_NOFILE; setting more fails even when the hard limit is "unlimited".
std::uint64_t kernel_nr_open() {
  std::ifstream in("/proc/sys/fs/nr_open");
  std::uint64_t n = 0;
  if (in >> n && n > 0) return n;
  return 1 << 20;  // the kernel's default
}

}  // namespace

open_file_limit raise_open_file_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return {};
  open_file_limit result{l.rlim_cur, l.rlim_cur};
  rlim_t target = l.rlim_max;
  if (target == RLIM_INFINITY) target = kernel_nr_open();
  if (target <= l.rlim_cur) return result;
  rlimit raised{target, l.rlim_max};
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) result.now = target;
  return result;
}

std::uint64_t reserved_descriptors(std::uint64_t limit) {
  return std::clamp<std::uint64_t>(limit / 8, 32, 1024);
}

std::uint64_t default_max_connections(std::uint64_t limit) {
  const auto reserve = reserved_descriptors(limit);
  return limit > reserve ? limit - reserve : 1;
}

}  // namespace sluice::core
