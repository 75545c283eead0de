// libFuzzer: bytes as a MEMORY_SNAPSHOT_FILE read at start. Checks: no crash, no unbounded allocation; a file
// that is refused hands out no entry and says why; one that is read gives back exactly what encoding its
// entries again gives (so every accepted file is canonical; a version 1 file, the same entries as version 2).
//
// Build and run: scripts/fuzz memory_snapshot [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/backends/memory/snapshot_format.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sluice::ratelimit::backends::memory;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  snapshot_encoder again;
  std::size_t visited = 0;
  const auto error = read_snapshot(
      bytes,
      [&](std::string_view key, std::uint64_t value, std::int64_t expires_at) {
        ++visited;
        check(again.add(key, value, expires_at));
      },
      [&](std::string_view key, const sluice::ratelimit::limiter::lease_slices& slices,
          std::int64_t expires_at) {
        ++visited;
        check(again.add_leases(key, slices, expires_at));
      },
      [&](std::string_view key, const sluice::ratelimit::limiter::lease_holders& holders,
          std::int64_t expires_at) {
        ++visited;
        check(again.add_holders(key, holders, expires_at));
      });
  if (error) {
    check(visited == 0 && !error->empty());
    return 0;
  }
  // written_at is not read back: take it from the file.
  std::int64_t written_at = 0;
  for (int i = 7; i >= 0; --i) written_at = (written_at << 8) | static_cast<unsigned char>(bytes[12 + i]);
  std::string encoded = again.finish(written_at);
  // A version 1 file (read as the current version's subset) is written again as the current version: its
  // entries must be the same, byte for byte.
  if (static_cast<unsigned char>(bytes[8]) == 1) {
    check(encoded.size() == bytes.size() && encoded[8] == static_cast<char>(snapshot_version));
    check(encoded.compare(9, encoded.size() - 13, bytes, 9, bytes.size() - 13) == 0);
    return 0;
  }
  check(encoded == bytes);
  return 0;
}
