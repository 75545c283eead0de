#include "net/h2/session_memory.hpp"

#include <sanitizer/asan_interface.h>  // no-op macros unless built with AddressSanitizer
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace sluice::net::h2 {

namespace {

constexpr std::size_t alignment = 16;  // as malloc's
// Unzeroed blocks this small are bookkeeping nghttp2 writes at once (a buffer chain): at the front.
constexpr std::size_t small_block = 256;
// Unzeroed blocks this large are buffers written from their start as soon as the session sends (the frame
// buffer): at the front too, so their start shares a page with the session object.
constexpr std::size_t large_block = 4096;

// Zero-filled regions carved from large anonymous mappings. A region given back has its pages released
// (MADV_DONTNEED), which makes it zero-filled and unbacked again. Mappings are kept for reuse.
class region_pool {
 public:
  static constexpr std::size_t regions_per_mapping = 64;

  char* take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      const std::size_t bytes = session_memory::region_bytes * regions_per_mapping;
      // Room for every region there will be, reserved first: give_back must not allocate.
      free_.reserve(total_ + regions_per_mapping);
      void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      total_ += regions_per_mapping;
      for (std::size_t i = regions_per_mapping; i-- > 0;)
        free_.push_back(static_cast<char*>(m) + i * session_memory::region_bytes);
    }
    char* r = free_.back();
    free_.pop_back();
    return r;
  }

  void give_back(char* r) noexcept {
    // Fresh zero pages again; where that is refused (locked memory), zeroed by hand: blocks count on it.
    if (madvise(r, session_memory::region_bytes, MADV_DONTNEED) != 0)
      std::memset(r, 0, session_memory::region_bytes);
    std::lock_guard lock(mutex_);
    free_.push_back(r);  // capacity reserved for every region when its mapping was made: no allocation
  }

 private:
  std::mutex mutex_;
  std::vector<char*> free_;
  std::size_t total_ = 0;  // regions in all mappings
};

region_pool& pool() {
  static auto* p = new region_pool;  // never destroyed: sessions may outlive static destruction order
  return *p;
}

std::size_t round_up(std::size_t n) {
  return (n + alignment - 1) / alignment * alignment;
}

session_memory& self(void* p) {
  return *static_cast<session_memory*>(p);
}

}  // namespace

// Under AddressSanitizer the region is poisoned but for its live blocks, so overflows and uses after free in
// the region are caught as they are on the heap.
session_memory::session_memory() : region_(pool().take()) {
  ASAN_POISON_MEMORY_REGION(region_, region_bytes);
  mem_.mem_user_data = this;
  mem_.malloc = [](std::size_t n, void* p) { return self(p).allocate(n, false); };
  mem_.free = [](void* ptr, void* p) { self(p).free(ptr); };
  mem_.calloc = [](std::size_t count, std::size_t n, void* p) -> void* {
    if (n != 0 && count > static_cast<std::size_t>(-1) / n) return nullptr;
    return self(p).allocate(count * n, true);
  };
  mem_.realloc = [](void* ptr, std::size_t n, void* p) { return self(p).reallocate(ptr, n); };
}

session_memory::~session_memory() {
  ASAN_UNPOISON_MEMORY_REGION(region_, region_bytes);
  pool().give_back(region_);
}

void* session_memory::allocate(std::size_t n, bool zeroed) {
  const std::size_t need = n <= region_bytes ? round_up(n) : region_bytes + 1;
  if (!sealed_ && n > 0 && need <= back_ - front_ && block_count_ < blocks_.size()) {
    // The front: what is written at once. The back: tables written only when streams and headers come.
    const bool front = block_count_ == 0 || (!zeroed && (n < small_block || n >= large_block));
    std::size_t at = 0;
    if (front) {
      at = front_;
      front_ += need;
    } else {
      back_ -= need;
      at = back_;
    }
    blocks_[block_count_++] = {static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(n)};
    ASAN_UNPOISON_MEMORY_REGION(region_ + at, n);
    return region_ + at;  // fresh zero pages: zeroed without a memset, and untouched until written
  }
  return zeroed ? std::calloc(1, n) : std::malloc(n);
}

std::size_t session_memory::size_of(const void* p) const {
  const auto offset = static_cast<std::uint32_t>(static_cast<const char*>(p) - region_);
  for (std::size_t i = 0; i < block_count_; ++i)
    if (blocks_[i].offset == offset) return blocks_[i].size;
  return 0;
}

void session_memory::free(void* p) {
  if (!owns(p)) return std::free(p);
  // A region block's space stays until the region goes.
  ASAN_POISON_MEMORY_REGION(p, size_of(p));
}

void* session_memory::reallocate(void* p, std::size_t n) {
  if (p == nullptr) return allocate(n, false);
  if (!owns(p)) return std::realloc(p, n);
  const std::size_t old = size_of(p);
  void* moved = std::malloc(n);
  if (moved == nullptr) return nullptr;  // realloc's contract: the old block stays
  std::memcpy(moved, p, old < n ? old : n);
  free(p);
  return moved;
}

}  // namespace sluice::net::h2
