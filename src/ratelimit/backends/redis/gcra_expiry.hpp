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
#include <unordered_map>

namespace sluice::ratelimit::backends::redis {

class gcra_expiry {
 public:
  explicit gcra_expiry(std::size_t capacity = 65'536) : capacity_(capacity) {}

  // True when a decision at `now_us` with tolerance τ must send the key's PEXPIRE; it is then taken as sent.
  bool due(std::string_view key, std::int64_t now_us, std::int64_t tolerance_us);

  // The PEXPIRE sent for the key (by its hash()) may not have run: the next decision sends it again.
  void forget(std::uint64_t key_hash) { next_due_.erase(key_hash); }
  static std::uint64_t hash(std::string_view key);

  std::size_t size() const { return next_due_.size(); }

 private:
  std::size_t capacity_;
  struct sent {
    std::int64_t next_due_us;   // when the key's PEXPIRE is due again
    std::int64_t tolerance_us;  // the τ it was sent with
  };
  std::unordered_map<std::uint64_t, sent> next_due_;  // by the key's hash
  std::int64_t next_sweep_us_ = 0;                    // when full: no entry can be forgotten before then
};

}  // namespace sluice::ratelimit::backends::redis
