#pragma once
// Where libnghttp2 puts one session's memory (an nghttp2_mem allocator), so that an idle connection costs
// about one page of nghttp2 memory instead of four.
//
// Creating a session, nghttp2 allocates ~25 KB: the session object (2.9 KB, written at once), a 4 KB stream
// map and two 1 KB HPACK tables (written only when streams and headers come), and a 16 KB frame buffer
// (written from its start by every frame sent). From the heap, an idle connection keeps ~11 KB of that
// resident: the zeroed map, the session object, a page of the frame buffer. Here those blocks are carved from
// one region of fresh zero pages (so zeroed blocks need no memset and stay untouched until used): what
// nghttp2 writes at once (the session object, a buffer chain, the start of the frame buffer) side by side at
// the front, the tables at the back. Blocks allocated after the session exists come from the heap; a region
// block is never reused, and the region goes back (its pages released) when the session does.
//
// A session_memory belongs to one session; the pool of regions behind it is shared and locked (taken and
// given back once per connection).

#include <nghttp2/nghttp2.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace sluice::net::h2 {

class session_memory {
 public:
  static constexpr std::size_t region_bytes = 28 * 1024;

  session_memory();
  ~session_memory();
  session_memory(const session_memory&) = delete;
  session_memory& operator=(const session_memory&) = delete;

  nghttp2_mem* mem() { return &mem_; }
  // The session exists: from now on every allocation comes from the heap.
  void seal() { sealed_ = true; }
  // Bytes of the region in use (for tests).
  std::size_t used() const { return front_ + (region_bytes - back_); }
  bool owns(const void* p) const {
    auto* c = static_cast<const char*>(p);
    return c >= region_ && c < region_ + region_bytes;
  }

 private:
  void* allocate(std::size_t n, bool zeroed);
  void free(void* p);
  void* reallocate(void* p, std::size_t n);
  std::size_t size_of(const void* p) const;

  nghttp2_mem mem_;
  char* region_ = nullptr;
  std::size_t front_ = 0;            // next free byte from the start
  std::size_t back_ = region_bytes;  // first used byte from the end
  // The region's blocks, for realloc (nghttp2 makes about five; past this many, blocks come from the heap).
  struct block {
    std::uint32_t offset;
    std::uint32_t size;
  };
  std::array<block, 12> blocks_{};
  std::size_t block_count_ = 0;
  bool sealed_ = false;
};

}  // namespace sluice::net::h2
