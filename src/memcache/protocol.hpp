#pragma once
// The memcached text protocol without I/O, for the commands a rate limiter needs: encoding `get` (many keys),
// `incr`, `decr`, `add` (and the operator's `set` and `delete`), and decoding their replies from bytes. What
// memcached rejects (a key over 250 bytes, or with a space or a control byte) is refused here, before
// anything is written, so no malformed command ever reaches the wire. A `CLIENT_ERROR` or `SERVER_ERROR`
// reply is a value, not a protocol error.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/problem.hpp"

namespace sluice::memcache {

namespace limits {
inline constexpr std::size_t max_key_length = 250;  // memcached's KEY_MAX_LENGTH
// memcached's default item_size_max (-I 1m): a VALUE line announcing more is a corrupt stream.
inline constexpr std::uint64_t max_value_length = 1024 * 1024;
// A reply line longer than this without CRLF is malformed ("VALUE <250-byte key> <flags> <bytes>" fits), so
// a garbage stream fails at once instead of being buffered while we wait for a CRLF.
inline constexpr std::size_t max_line_length = 512;
// memcached reads an exptime above 30 days as an absolute Unix time.
inline constexpr std::uint32_t max_relative_exptime = 30 * 24 * 3600;
}  // namespace limits

// Why memcached would refuse `key`, or nothing when it is a valid key.
core::problem key_problem(std::string_view key);

// The exptime to send for a lifetime of `ttl_seconds` from `now` (Unix seconds): relative up to 30 days, an
// absolute time beyond (upstream sends the relative value, which memcached takes for a time in 1970: such
// keys expire at once and MONTH/YEAR limits never count).
std::uint32_t exptime_for(std::uint32_t ttl_seconds, std::int64_t now);

// Appenders; the keys must have passed key_problem.
// A get-multi is built in two steps, so that a pipeline can merge the keys of many requests into one command:
// add_get_key appends " <key>" to a key list, encode_get writes the command that asks for a key list.
void add_get_key(std::string& key_list, std::string_view key);
void encode_get(std::string& out, std::string_view key_list);
void encode_incr(std::string& out, std::string_view key, std::uint64_t delta);
// memcached's decr stops at 0 and keeps the item's exptime: negative hits. Its reply is incr's.
void encode_decr(std::string& out, std::string_view key, std::uint64_t delta);
void encode_add(std::string& out, std::string_view key, std::string_view value, std::uint32_t exptime);
// Operator control (the counters API): `set` (a store reply) and `delete` (an erase reply).
void encode_set(std::string& out, std::string_view key, std::string_view value, std::uint32_t exptime);
void encode_delete(std::string& out, std::string_view key);

enum class reply_kind : std::uint8_t { values, incr, store, erase };

struct item {
  std::string key;
  std::uint32_t flags = 0;
  std::string data;
};

struct reply {
  enum class status : std::uint8_t {
    values,        // get: `items` (possibly empty)
    number,        // incr: the value after the increment
    stored,        // add, set
    not_stored,    // add: the key exists
    not_found,     // incr, delete: no such key
    deleted,       // delete
    error,         // ERROR: an unknown command
    client_error,  // CLIENT_ERROR <message>
    server_error,  // SERVER_ERROR <message>
  };
  status result = status::values;
  std::vector<item> items;
  std::uint64_t number = 0;
  std::string message;
};

enum class parse_status { complete, need_more, protocol_error };

// Decodes the reply to one command of kind `kind` from the front of `data`. On complete, `consumed` is its
// length and `out` holds it; on need_more nothing is consumed; on protocol_error, `error_message` says what
// was wrong (the connection cannot be trusted after that).
parse_status parse_reply(std::string_view data, reply_kind kind, std::size_t& consumed, reply& out,
                         std::string& error_message);

}  // namespace sluice::memcache
