#pragma once
// CPU and heap profiles in the pprof format that `google-pprof` (Debian's gperftools) reads, for the debug
// server's /debug/pprof/ endpoints. One profile of each kind at a time: gperftools profiles the whole
// process.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>

namespace sluice::core {

struct profile_result {
  std::optional<std::string> data;  // the profile, or nothing when...
  std::string error;                // ...this says why (one is already running, gperftools failed)
};

// Samples the CPU of every thread for `duration`, waiting on the io_context (no thread blocks).
boost::asio::awaitable<profile_result> cpu_profile(std::chrono::seconds duration);

// Records the allocations made during `duration` that are still live at its end (gperftools' heap profiler
// slows allocation while it runs, so it runs only for the window asked for).
boost::asio::awaitable<profile_result> heap_profile(std::chrono::seconds duration);

}  // namespace sluice::core
