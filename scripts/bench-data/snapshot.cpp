// scripts/bench snapshot: MEMORY_SNAPSHOT_FILE with a million counters. Fills a memory backend with N
// counters whose keys look like the bench rule's (fixed windows of one hour), writes the snapshot to FOLDER
// (temporary file, fsync, rename, fsync of the folder), reads it back into an empty backend, and prints both
// times and the file's size. Usage: bench_snapshot FOLDER [N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/snapshot_file.hpp"

int main(int argc, char** argv) {
  using namespace sluice::ratelimit::backends::memory;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_snapshot FOLDER [N]\n");
    return 2;
  }
  const std::string file = std::string(argv[1]) + "/bench-snapshot.bin";
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1'000'000;
  sluice::core::fake_clock clock(1'795'000'000);
  memory_backend full(clock, n + 1);
  for (std::size_t i = 0; i < n; ++i)
    full.restore("rl_client_c" + std::to_string(i) + "_1794999600", i % 1000 + 1, 1'795'003'600);
  const auto wrote = write_snapshot(full, file, clock.now_seconds());
  memory_backend empty(clock, n + 1);
  const auto read = restore_snapshot(empty, file, clock.now_seconds());
  std::FILE* f = std::fopen(file.c_str(), "rb");
  long size = 0;
  if (f != nullptr) {
    std::fseek(f, 0, SEEK_END);
    size = std::ftell(f);
    std::fclose(f);
  }
  std::remove(file.c_str());
  std::printf("snapshot: wrote %zu counters (%.1f MB) in %.0f ms; read back %zu in %.0f ms%s\n",
              wrote.counters, static_cast<double>(size) / 1e6, wrote.milliseconds, read.result.counters,
              read.result.milliseconds, read.error ? (" (error: " + *read.error + ")").c_str() : "");
  return read.error || read.result.counters != n ? 1 : 0;
}
