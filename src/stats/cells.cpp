#include "stats/cells.hpp"

#include <stdexcept>
#include <unordered_map>

namespace sluice::stats::detail {

namespace {

std::atomic<std::uint64_t> next_identity{1};

// The block this thread uses for each cells instance it counted into; the last one is checked first.
struct thread_cache {
  std::uint64_t last_identity = 0;
  cell_block* last_block = nullptr;
  std::unordered_map<std::uint64_t, cell_block*> blocks;
};
// initial-exec: the executable links this statically, so no __tls_get_addr call per count.
thread_local thread_cache cache __attribute__((tls_model("initial-exec")));

}  // namespace

cell_block::~cell_block() {
  for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
}

std::atomic<std::uint64_t>& cell_block::at(std::size_t id) {
  const std::size_t chunk = id / chunk_cells;
  if (chunk >= max_chunks) throw std::length_error("stats: too many counters");
  auto* cells = chunks_[chunk].load(std::memory_order_relaxed);
  if (cells == nullptr) {
    cells = new std::atomic<std::uint64_t>[chunk_cells]();
    chunks_[chunk].store(cells, std::memory_order_release);
  }
  return cells[id % chunk_cells];
}

std::uint64_t cell_block::read(std::size_t id) const {
  const std::size_t chunk = id / chunk_cells;
  if (chunk >= max_chunks) return 0;
  const auto* cells = chunks_[chunk].load(std::memory_order_acquire);
  return cells == nullptr ? 0 : cells[id % chunk_cells].load(std::memory_order_relaxed);
}

cells::cells() : identity_(next_identity.fetch_add(1, std::memory_order_relaxed)) {}

cell_block& cells::local() {
  if (cache.last_identity == identity_) return *cache.last_block;
  auto it = cache.blocks.find(identity_);
  cell_block* block = it != cache.blocks.end() ? it->second : &register_thread();
  cache.last_identity = identity_;
  cache.last_block = block;
  return *block;
}

cell_block& cells::register_thread() {
  std::lock_guard lock(mutex_);
  auto* block = blocks_.emplace_back(std::make_unique<cell_block>()).get();
  cache.blocks.emplace(identity_, block);
  return *block;
}

std::uint64_t cells::sum(std::size_t id) const {
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const auto& b : blocks_) total += b->read(id);
  return total;
}

}  // namespace sluice::stats::detail
