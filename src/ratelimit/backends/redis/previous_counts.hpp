#pragma once
// The counts of sliding windows' previous windows, once they are final. A window's counter changes while the
// window is current, and for a short grace after it (increments in flight, a take-back of hits not admitted,
// a clock a little behind): min(1 s, a tenth of the window). From then until the window is no longer the
// previous one, its count is read from Redis once per worker and kept, so a sliding window's decision costs
// Redis what a fixed window's does: INCRBY and EXPIRE, without the MGET. Keys are remembered by a 64-bit
// hash, at most `capacity` of them (beyond that, the MGET is sent, as without this). One per store and
// worker, used on its thread only: no lock.

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ratelimit/backends/redis/expiring_cache.hpp"
#include "ratelimit/limiter/backend.hpp"

namespace sluice::ratelimit::backends::redis {

class previous_counts {
 public:
  explicit previous_counts(std::size_t capacity = 65'536) : counts_(capacity) {}

  // The final count of the sliding op's previous window, if this worker has read it since it became final.
  std::optional<std::uint64_t> find(const limiter::counter_op& op);
  // The count the op's MGET read: kept when the previous window was final at the op's time.
  void remember(const limiter::counter_op& op, std::uint64_t count);

  std::size_t size();

 private:
  expiring_cache<std::uint64_t> counts_;  // by the previous window's key, until that window stops being it
};

}  // namespace sluice::ratelimit::backends::redis
