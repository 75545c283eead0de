#pragma once
// Per-thread counting cells: each thread that counts gets its own block of cells, so workers never write to a
// shared cache line on the request path (a shared atomic add costs ~100 ns when two cores take turns with
// it). A value is the sum of its cell in every block, read at flush time. Only the owning thread writes a
// block (a relaxed load and store, no read-modify-write); any thread may read.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sluice::stats::detail {

class cell_block {
 public:
  static constexpr std::size_t chunk_cells = 512;
  static constexpr std::size_t max_chunks = 4096;  // two million cells

  ~cell_block();
  // The owning thread's cell `id` (its chunk is made on first use).
  std::atomic<std::uint64_t>& at(std::size_t id);
  // Any thread: the value of cell `id` (0 before the owner first touched its chunk).
  std::uint64_t read(std::size_t id) const;

 private:
  std::array<std::atomic<std::atomic<std::uint64_t>*>, max_chunks> chunks_{};
};

class cells {
 public:
  cells();
  // A new cell id (the same id in every thread's block).
  std::size_t allocate() { return next_.fetch_add(1, std::memory_order_relaxed); }
  void add(std::size_t id, std::uint64_t n) {
    auto& c = local().at(id);
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t sum(std::size_t id) const;

 private:
  cell_block& local();
  cell_block& register_thread();

  const std::uint64_t identity_;  // never reused, unlike addresses: keys the per-thread cache
  std::atomic<std::size_t> next_{0};
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<cell_block>> blocks_;
};

}  // namespace sluice::stats::detail
