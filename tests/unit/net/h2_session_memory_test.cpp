// nghttp2's allocator for one session (net/h2/session_memory): region blocks until sealed, zeroed blocks,
// realloc out of the region, the heap when the region is full, and a real session on it.

#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <cstring>
#include <vector>

#include "net/h2/session_memory.hpp"

using sluice::net::h2::session_memory;

namespace {

void* do_malloc(session_memory& m, std::size_t n) {
  return m.mem()->malloc(n, m.mem()->mem_user_data);
}
void* do_calloc(session_memory& m, std::size_t n) {
  return m.mem()->calloc(1, n, m.mem()->mem_user_data);
}
void* do_realloc(session_memory& m, void* p, std::size_t n) {
  return m.mem()->realloc(p, n, m.mem()->mem_user_data);
}
void do_free(session_memory& m, void* p) {
  m.mem()->free(p, m.mem()->mem_user_data);
}

}  // namespace

TEST_CASE("blocks come from the region until sealed, then from the heap") {
  session_memory m;
  void* a = do_calloc(m, 3000);
  void* b = do_malloc(m, 1024);
  CHECK(m.owns(a));
  CHECK(m.owns(b));
  CHECK(m.used() >= 4024);
  m.seal();
  void* c = do_malloc(m, 64);
  CHECK_FALSE(m.owns(c));
  do_free(m, c);
  do_free(m, b);
  do_free(m, a);
}

TEST_CASE("zeroed blocks are zero, even in a region used before") {
  for (int round = 0; round < 3; ++round) {  // regions are given back and taken again
    session_memory m;
    auto* a = static_cast<unsigned char*>(do_calloc(m, 4096));
    REQUIRE(m.owns(a));
    for (std::size_t i = 0; i < 4096; ++i) REQUIRE(a[i] == 0);
    std::memset(a, 0xab, 4096);
  }
}

TEST_CASE("the first block, small blocks and large unzeroed blocks are at the front; tables at the back") {
  session_memory m;
  auto* first = static_cast<char*>(do_calloc(m, 2928));
  auto* table = static_cast<char*>(do_malloc(m, 1024));
  auto* chain = static_cast<char*>(do_malloc(m, 48));
  auto* buffer = static_cast<char*>(do_realloc(m, nullptr, 16394));
  CHECK(chain == first + 2928);
  CHECK(buffer == chain + 48);
  CHECK(table == first + session_memory::region_bytes - 1024);
}

TEST_CASE("realloc of a region block moves it to the heap with its contents") {
  session_memory m;
  auto* a = static_cast<char*>(do_malloc(m, 1024));
  std::memcpy(a, "0123456789", 10);
  auto* b = static_cast<char*>(do_realloc(m, a, 8192));
  CHECK_FALSE(m.owns(b));
  CHECK(std::memcmp(b, "0123456789", 10) == 0);
  auto* c = static_cast<char*>(do_realloc(m, b, 16));
  CHECK(std::memcmp(c, "0123456789", 10) == 0);
  do_free(m, c);
}

TEST_CASE("a block that does not fit comes from the heap") {
  session_memory m;
  void* big = do_malloc(m, session_memory::region_bytes + 1);
  CHECK_FALSE(m.owns(big));
  do_free(m, big);
  void* zero = do_malloc(m, 0);
  CHECK_FALSE(m.owns(zero));
  do_free(m, zero);
}

TEST_CASE("an nghttp2 session on it exchanges SETTINGS and frees what it allocated later") {
  session_memory m;
  nghttp2_session_callbacks* cbs = nullptr;
  REQUIRE(nghttp2_session_callbacks_new(&cbs) == 0);
  nghttp2_session* ng = nullptr;
  REQUIRE(nghttp2_session_server_new3(&ng, cbs, nullptr, nullptr, m.mem()) == 0);
  m.seal();
  CHECK(m.owns(ng));  // the session object itself
  const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
  REQUIRE(nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, settings, 1) == 0);
  static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";
  CHECK(nghttp2_session_mem_recv(ng, reinterpret_cast<const std::uint8_t*>(hello), sizeof hello - 1) ==
        static_cast<ssize_t>(sizeof hello - 1));
  std::vector<std::uint8_t> out;
  const std::uint8_t* data = nullptr;
  for (ssize_t n; (n = nghttp2_session_mem_send(ng, &data)) > 0;) out.insert(out.end(), data, data + n);
  REQUIRE(out.size() >= 9 + 6 + 9);  // our SETTINGS (one entry) and the ACK of the client's
  CHECK(out[3] == NGHTTP2_SETTINGS);
  nghttp2_session_del(ng);
  nghttp2_session_callbacks_del(cbs);
}
