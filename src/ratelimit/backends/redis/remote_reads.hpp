#pragma once
// Several regions (docs/guides/regions.md): one round's read of a region's Redis as commands and back — the
// replica's state (INFO replication), the region's heartbeat (<prefix>sluice_region:<region>, a field per
// instance: "<unix ms>|<region>=1,<region>=0,..." saying which remote regions it could read), and the totals
// of the tracked keys: MGET per 512 counters, HGETALL per lease hash (the slices still held, summed), and per
// holder set ZRANGEBYSCORE of the live holders and HGETALL of their slots. No I/O here: region_reader sends.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/backends/redis/remote_view.hpp"
#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

inline constexpr std::size_t mget_chunk = 512;

// The heartbeat's key of `region`.
std::string heartbeat_key(std::string_view key_prefix, std::string_view region);
// A heartbeat field's value, and back: when it was written and which remote regions its instance could read.
std::string encode_heartbeat(std::int64_t unix_ms, const std::map<std::string, bool>& sees);
bool decode_heartbeat(std::string_view text, std::int64_t& unix_ms, std::map<std::string, bool>& sees);
// Each field of a heartbeat hash (an HGETALL reply) that decodes: f(instance, unix ms, sees). A field that
// does not (another version's) is skipped.
template <typename F>
void for_each_heartbeat(const sluice::redis::value& hash, F f) {
  const auto& fields = hash.elements;
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    std::int64_t unix_ms = 0;
    std::map<std::string, bool> sees;
    if (decode_heartbeat(fields[i + 1].text, unix_ms, sees)) f(fields[i].text, unix_ms, sees);
  }
}

// The keys of one read, in the order their totals come back.
struct key_read {
  const std::string* key;
  const tracked_key* how;
};

// What a region's Redis said of its state.
struct region_health {
  bool replica = false;                      // role:slave
  bool link_up = true;                       // a replica's master_link_status (a primary: always)
  std::int64_t last_io_s = 0;                // a replica's master_last_io_seconds_ago
  std::optional<std::int64_t> heartbeat_ms;  // the newest heartbeat field (none: no instance wrote one yet)
  // Regions the instances of that region could not read, as their fresh fields say (one-sided partitions).
  std::vector<std::string> cannot_see;
};

// Appends the round's commands: INFO replication, HGETALL of `heartbeat`, then the keys' reads. `keys` must
// list every counter before any concurrency key (order_for_reads).
void push_remote_reads(sluice::redis::request& out, std::string_view heartbeat,
                       std::span<const key_read> keys, std::int64_t now_us);
// Counters first, then leases, then holders: the order push_remote_reads needs.
void order_for_reads(std::vector<key_read>& keys);
// The replies of push_remote_reads: the region's state, and each key's total in `totals` (aligned with
// `keys`). `fresh_ms`: fields older than this (unix ms) are ignored in `cannot_see`. False when the replies
// are not what was asked (an error reply: the reason in `error`).
bool read_remote_replies(std::span<const sluice::redis::value> replies, std::span<const key_read> keys,
                         std::int64_t now_us, std::int64_t fresh_ms, region_health& health,
                         std::vector<std::uint64_t>& totals, std::string& error);

}  // namespace sluice::ratelimit::backends::redis
