#pragma once
// Which GCRA keys a worker must send a PEXPIRE for. Every write of a GCRA key leaves it a TTL of its bucket's
// length + 1 ms + gcra_expiry_slack_ms, counted from when Redis runs the write (gcra_command.hpp), and no
// write shortens it under the same rules. A worker that sent a key's PEXPIRE at time r knows the key lives
// until r + τ + slack at least, which covers any arrival time its decisions up to r + slack leave (≤ now +
// τ): it skips PEXPIRE until then, unless τ grew (a reload). One worker's, so one thread's; keys are
// remembered by a 64-bit hash, and at most `capacity` of them (beyond that, every decision sends its PEXPIRE,
// as without this).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ratelimit/backends/redis/expiring_cache.hpp"

namespace sluice::ratelimit::backends::redis {

class gcra_expiry {
 public:
  explicit gcra_expiry(std::size_t capacity = 65'536) : sent_(capacity) {}

  static std::uint64_t hash(std::string_view key) { return expiring_cache<sent>::hash(key); }

  // True when a decision at `now_us` with tolerance τ must send the PEXPIRE of the key (by its hash()); it
  // is then taken as sent.
  bool due(std::uint64_t key_hash, std::int64_t now_us, std::int64_t tolerance_us);

  // The PEXPIRE sent for the key may not have run: the next decision sends it again.
  void forget(std::uint64_t key_hash) { sent_.erase(key_hash); }

  std::size_t size() const { return sent_.size(); }

 private:
  struct sent {
    std::int64_t at_us;         // when the key's last PEXPIRE was sent
    std::int64_t tolerance_us;  // the τ it was sent with
  };
  expiring_cache<sent> sent_;  // each until its PEXPIRE is due again
};

}  // namespace sluice::ratelimit::backends::redis
