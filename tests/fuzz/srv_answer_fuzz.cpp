// libFuzzer: bytes as a DNS server's answer to an SRV query (MEMCACHE_SRV). Checks: no crash; a parsed answer
// lists at least one target, each "name.:port" with a port that fits 16 bits, sorted.
//
// Build and run: scripts/fuzz srv_answer [seconds]

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "memcache/srv_lookup.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parsed = sluice::memcache::parse_srv_answer("_memcache._tcp.example.org", {data, size});
  if (!parsed) {
    check(!parsed.error().empty());
    return 0;
  }
  const auto& targets = *parsed;
  check(!targets.empty());
  check(std::is_sorted(targets.begin(), targets.end()));
  for (const auto& t : targets) {
    const auto colon = t.rfind(':');
    check(colon != std::string::npos && colon > 0 && t[colon - 1] == '.');
    check(std::stoul(t.substr(colon + 1)) <= 65535);
  }
  return 0;
}
