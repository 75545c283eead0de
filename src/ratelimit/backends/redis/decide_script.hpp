#pragma once
// The Lua script behind sliding windows, GCRA and all-or-nothing batches on Redis: it reads every key of its
// ops, judges each op with limiter/algorithms.hpp's arithmetic (in Lua's doubles, which agree below 2^53),
// and applies the ops as its mode says — in one atomic step on one node. It is called by its SHA1 (EVALSHA)
// and sent whole (EVAL, which also loads it) only when the node answers NOSCRIPT.
//
//   KEYS: per op its key, and a sliding op's previous-window key after it
//   ARGV: mode ("i" each op on its own, "a" all or nothing, "e" evaluate only), now in microseconds, then per
//         op: kind ("c", "s", "g"), hits, refund ("1"/"0"), limit, window or interval (µs), tolerance (µs),
//         TTL (s)
//   reply: {1 if applied else 0, then per op: value, previous, before (a counter's value before the op)}; in
//          mode "i" the first is 1.

#include <optional>
#include <span>
#include <string_view>

#include "ratelimit/limiter/backend.hpp"
#include "redis/resp.hpp"

namespace sluice::ratelimit::backends::redis {

extern const std::string_view decide_script;
// The script's SHA1 in hex, as EVALSHA wants it.
std::string_view decide_script_sha();

// Appends one EVALSHA (or EVAL when `whole`) of `indexes` of `ops` to `out`.
void push_decide(sluice::redis::request& out, std::span<const limiter::counter_op> ops,
                 std::span<const std::size_t> indexes, limiter::batch_mode mode, bool whole);

// Reads a reply of the script into results[indexes[i]]; returns the applied flag, or nullopt when the reply
// is not the script's.
std::optional<bool> read_decide_reply(const sluice::redis::value& reply, std::span<const std::size_t> indexes,
                                      std::span<limiter::op_result> results);

}  // namespace sluice::ratelimit::backends::redis
