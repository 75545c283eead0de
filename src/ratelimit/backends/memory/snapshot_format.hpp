#pragma once
// The memory backend's snapshot (MEMORY_SNAPSHOT_FILE): every live counter — a fixed or sliding window's
// count, a GCRA arrival time — with its expiry, in a versioned, checksummed file. Little-endian throughout:
//
//   "SLUICEMS"            8 bytes, the magic
//   version               u32, 2 (version 1, without kind 2, is read too)
//   written_at            i64, Unix seconds
//   count                 u64, entries that follow
//   count × entry         u8 kind, u32 key length (at most max_snapshot_key), the key, then by kind:
//                         0, a counter: u64 value, i64 expires_at
//                         1, a concurrency limit's leases: i64 expires_at, u32 slices (1 to
//                         max_snapshot_slices),
//                            each i64 slice number and u64 count (limiter/leases.hpp), in ascending order
//                         2, a concurrency limit's leases per holder (holder_key): i64 expires_at, u32
//                            holders (1 to max_snapshot_holders), each u32 length (at most
//                            max_snapshot_key), the holder, u64 slots, i64 end (µs)
//   crc32                 u32, zlib's CRC-32 of every byte before it
//
// Reading checks the whole file before it hands out an entry: a file that is truncated, corrupt or of another
// version gives nothing but the reason.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/problem.hpp"
#include "ratelimit/limiter/leases.hpp"

namespace sluice::ratelimit::backends::memory {

inline constexpr std::uint32_t snapshot_version = 2;
inline constexpr std::uint32_t oldest_snapshot_version = 1;
inline constexpr std::size_t max_snapshot_key = 1 << 20;
inline constexpr std::size_t max_snapshot_slices = 64;
inline constexpr std::size_t max_snapshot_holders = 1 << 20;

class snapshot_encoder {
 public:
  snapshot_encoder();
  // Keys longer than max_snapshot_key are left out (no rule makes one); false then.
  bool add(std::string_view key, std::uint64_t value, std::int64_t expires_at);
  bool add_leases(std::string_view key, const limiter::lease_slices& slices, std::int64_t expires_at);
  bool add_holders(std::string_view key, const limiter::lease_holders& holders, std::int64_t expires_at);
  std::uint64_t count() const { return count_; }
  // The whole file; the encoder is spent.
  std::string finish(std::int64_t written_at);

 private:
  std::string out_;
  std::uint64_t count_ = 0;
};

using snapshot_visitor =
    std::function<void(std::string_view key, std::uint64_t value, std::int64_t expires_at)>;
using snapshot_lease_visitor =
    std::function<void(std::string_view key, const limiter::lease_slices& slices, std::int64_t expires_at)>;
using snapshot_holder_visitor =
    std::function<void(std::string_view key, const limiter::lease_holders& holders, std::int64_t expires_at)>;

// Checks `bytes` as a whole, then calls `visit` (or `leases`, `holders`) for each entry, in file order.
// Returns why the file cannot be read ("truncated", "not a Sluice memory snapshot", "version 3 (this Sluice
// reads versions 1 to 2)", "checksum mismatch", ...), in which case none was ever called.
core::problem read_snapshot(std::string_view bytes, const snapshot_visitor& visit,
                            const snapshot_lease_visitor& leases = {},
                            const snapshot_holder_visitor& holders = {});

}  // namespace sluice::ratelimit::backends::memory
