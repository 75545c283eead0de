#include "core/profiler.hpp"

#ifndef SLUICE_NO_TCMALLOC
#include <gperftools/heap-profiler.h>
#endif
#include <gperftools/profiler.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/read_file.hpp"
#include "core/strings.hpp"
#include "core/use_tuple.hpp"

namespace sluice::core {

namespace asio = boost::asio;

namespace {

std::atomic<bool> cpu_busy{false};
#ifndef SLUICE_NO_TCMALLOC
std::atomic<bool> heap_busy{false};
#endif

// Clears a busy flag however the coroutine leaves.
struct busy_guard {
  std::atomic<bool>& flag;
  ~busy_guard() { flag.store(false); }
};

asio::awaitable<void> sleep_for(std::chrono::seconds duration) {
  asio::steady_timer timer(co_await asio::this_coro::executor, duration);
  co_await timer.async_wait(core::use_tuple);
}

}  // namespace

asio::awaitable<profile_result> cpu_profile(std::chrono::seconds duration) {
  if (cpu_busy.exchange(true)) co_return profile_result{std::nullopt, "a CPU profile is already being taken"};
  busy_guard guard{cpu_busy};
  char path[] = "/tmp/sluice-cpu-XXXXXX";
  const int fd = mkstemp(path);
  // gperftools writes CPU profiles to a file: on a read-only root this is the one place that needs /tmp.
  if (fd < 0)
    co_return profile_result{std::nullopt,
                             std::string("cannot create a temporary file for the CPU profile in /tmp: ") +
                                 std::strerror(errno) + " (a read-only root needs a writable /tmp)"};
  close(fd);
  if (ProfilerStart(path) == 0) {
    std::remove(path);
    co_return profile_result{std::nullopt, "gperftools could not start the CPU profiler"};
  }
  co_await sleep_for(duration);
  ProfilerStop();
  auto data = read_file(path);
  std::remove(path);
  if (!data) co_return profile_result{std::nullopt, "the CPU profile could not be read back"};
  co_return profile_result{std::move(*data), {}};
}

asio::awaitable<profile_result> heap_profile(std::chrono::seconds duration) {
#ifdef SLUICE_NO_TCMALLOC
  (void)duration;
  co_return profile_result{std::nullopt,
                           "heap profiles need tcmalloc, and this build has none (-Dtcmalloc=false)"};
#else
  if (heap_busy.exchange(true) || IsHeapProfilerRunning() != 0)
    co_return profile_result{std::nullopt, "a heap profile is already being taken"};
  busy_guard guard{heap_busy};
  // The prefix is only used for automatic dumps, which are off (the intervals below are zero by default).
  HeapProfilerStart("/tmp/sluice-heap");
  co_await sleep_for(duration);
  std::unique_ptr<char, decltype(&std::free)> text(GetHeapProfile(), &std::free);
  HeapProfilerStop();
  if (!text) co_return profile_result{std::nullopt, "gperftools returned no heap profile"};
  co_return profile_result{std::string(text.get()), {}};
#endif
}

}  // namespace sluice::core
