#pragma once
// What the Redis backend and the synced counters send about a counter, and how they read its value back.

#include <cstdint>
#include <optional>
#include <string_view>

#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

// Negative hits in one atomic step: nothing to give back to an absent key, never below 0, the TTL kept
// (DECRBY does not touch it). The numbers stay strings (canonical decimals, so the longer one is larger):
// Lua's doubles round above 2^53, and Redis 7.2.0-7.2.4 hand some of them to DECRBY as "1e+08". Sent with
// EVAL: refunds are rare, and Redis caches the compiled script.
inline constexpr std::string_view refund_script =
    "local c = redis.call('GET', KEYS[1]) "
    "if not c or c:byte(1) == 45 then return 0 end "
    "local a = ARGV[1] "
    "if #a > #c or (#a == #c and a >= c) then a = c end "
    "return redis.call('DECRBY', KEYS[1], a)";

// Batched counting's refund beyond a worker's view: gives back up to ARGV[1] hits of those the counter holds
// above ARGV[2] (the value that worker's view counted on), which are other workers' hits it had not seen.
// Its own are given back by its other negative hits. Numbers as Lua doubles: exact to 2^53, where a counter's
// hits are. A counter that is not an integer gets DECRBY's own error, as with refund_script.
inline constexpr std::string_view unseen_refund_script =
    "local c = redis.call('GET', KEYS[1]) "
    "if not c or c:byte(1) == 45 then return 0 end "
    "local n = tonumber(c) "
    "if not n then return redis.call('DECRBY', KEYS[1], ARGV[1]) end "
    "local a = math.min(tonumber(ARGV[1]), n - tonumber(ARGV[2])) "
    "if a < 0 then a = 0 end "
    "return redis.call('DECRBY', KEYS[1], string.format('%d', a))";

// Reads INCRBY's integer, or GET's bulk string (nil = 0). A negative counter reads 0: a sliding window's
// take-back (a DECRBY not waited for) can land after negative hits brought the counter to 0.
std::optional<std::uint64_t> counter_value(const sluice::redis::value& v);

// Whether an error reply to a counter command says the key can never take it (it holds something else than a
// counter, or the count would overflow), rather than that Redis cannot take writes now (READONLY, LOADING,
// MASTERDOWN, OOM, a cluster's TRYAGAIN or CLUSTERDOWN): the second kind is worth sending again.
bool refuses_for_good(std::string_view error_reply);

}  // namespace sluice::ratelimit::backends::redis
