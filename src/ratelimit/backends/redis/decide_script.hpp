#pragma once
// The Lua script behind all-or-nothing batches on Redis (GCRA on its own is gcra_command.hpp's BITFIELD). One
// call carries the groups of ops of every decision a worker made in one turn (script_batcher): for each group
// it reads the keys, judges each op with limiter/algorithms.hpp's arithmetic (in Lua's doubles, which agree
// below 2^53) and applies the group as its mode says; groups see each other's changes in order, and every key
// changed is written once at the end — all in one atomic step on one node. The keys are read with MGET, and a
// counter's usual write is INCRBY of the hits Sluice sent, not a number Lua prints: each `redis.call` and
// each number printed costs Redis about a microsecond. It is called by its SHA1 (EVALSHA) and sent whole
// (EVAL, which also loads it) only when the node answers NOSCRIPT.
//
//   KEYS: per op its key, and a sliding op's previous-window key after it (a concurrency op per holder: its
//         holders' slots key, holder_slots_key)
//   ARGV: the number of specs, then each spec: kind ("c", "s", "g", "k" leases per slice, "h" per holder),
//         limit, window or interval or lease (µs), tolerance (µs); then per group: mode ("i" each op on its
//         own, "a" all or nothing, "e" evaluate only), now (µs), the number of ops, then per op: its spec's
//         index + 2^24 × its role (op_role), hits (negative: given back), and for a counter (c, s) its TTL in
//         seconds, for "h" the holder; or a run of m groups in
//         mode "i" with the same GCRA ops (keys, specs, hits), as a hot descriptor's decisions send them:
//         "r", m, the number of ops c, c × (spec index, hits), then each group's now (µs); its c keys are in
//         KEYS once
//   reply: per group (a run's each): 1 if applied (always in mode "i") else 0, then per op: gcra its
//          arrival time; c its value and its value before; s its value, the previous window's count and its
//          value before; k value, before, expired, oldest lease's end; h the same, holders, the holder's
//          slots before

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ratelimit/limiter/backend.hpp"
#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

extern const std::string_view decide_script;
// A concurrency limit per holder keeps its leases in a ZSET at the op's key and the slots in a HASH here (the
// same hash tag, so one slot of a cluster).
std::string holder_slots_key(std::string_view key);
// The script's SHA1 in hex, as EVALSHA wants it.
std::string_view decide_script_sha();

// One decision's ops for the script.
struct script_group {
  std::span<const limiter::counter_op> ops;
  std::span<const std::size_t> indexes;  // which of ops, in order
  limiter::batch_mode mode;
  bool quota_as_advisory = false;  // a part of a batch split over nodes: the quota verdict is taken by Sluice
};

// The arguments of one EVALSHA (or EVAL when `whole`) of `groups`. The views point into `numbers` and the
// groups' ops, which must outlive the request's encoding.
void push_decide(sluice::redis::request& out, std::span<const script_group> groups, bool whole);

// Reads a group's part of a reply, starting at element `at` (advanced past it), into results[indexes[i]];
// returns the applied flag, or nullopt when the reply is not the script's.
std::optional<bool> read_decide_reply(const sluice::redis::value& reply, std::size_t& at,
                                      std::span<const limiter::counter_op> ops,
                                      std::span<const std::size_t> indexes,
                                      std::span<limiter::op_result> results);
// How many reply elements a group takes.
std::size_t decide_reply_size(std::span<const limiter::counter_op> ops, std::span<const std::size_t> indexes);

}  // namespace sluice::ratelimit::backends::redis
