#include "ratelimit/backends/redis/gcra_expiry.hpp"

#include "ratelimit/backends/redis/gcra_command.hpp"

namespace sluice::ratelimit::backends::redis {

bool gcra_expiry::due(std::uint64_t key_hash, std::int64_t now_us, std::int64_t tolerance_us) {
  // Skipped within the slack after the last PEXPIRE; a clock set back before it sends one again.
  if (const sent* last = sent_.find(key_hash, now_us);
      last != nullptr && now_us >= last->at_us && tolerance_us <= last->tolerance_us)
    return false;
  sent_.put(key_hash, sent{now_us, tolerance_us}, now_us + gcra_expiry_slack_ms * 1000, now_us);
  return true;
}

}  // namespace sluice::ratelimit::backends::redis
