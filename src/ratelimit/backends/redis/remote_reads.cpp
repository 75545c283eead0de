#include "ratelimit/backends/redis/remote_reads.hpp"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "core/strings.hpp"
#include "ratelimit/backends/redis/decide_script.hpp"

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

namespace remote_reads_parse {

std::optional<std::int64_t> integer(std::string_view text) {
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// A counter as Redis holds it (a bulk string of digits; nil: 0). A negative or foreign value counts 0.
std::uint64_t count_of(const rd::value& v) {
  if (v.type == rd::value::kind::integer) return v.integer > 0 ? static_cast<std::uint64_t>(v.integer) : 0;
  if (v.type != rd::value::kind::bulk_string) return 0;
  const auto n = integer(v.text);
  return n && *n > 0 ? static_cast<std::uint64_t>(*n) : 0;
}

void read_info(std::string_view text, region_health& h) {
  for (auto line : core::split(text, '\n')) {
    line = core::trim_space(line);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const auto name = line.substr(0, colon), value = line.substr(colon + 1);
    if (name == "role") h.replica = value == "slave";
    if (name == "master_link_status") h.link_up = value == "up";
    if (name == "master_last_io_seconds_ago") h.last_io_s = integer(value).value_or(-1);
  }
  if (!h.replica) h.link_up = true;
}

// The heartbeat hash's newest time, and the regions its fresh fields (at least `fresh_ms`) say they cannot
// read.
void read_heartbeats(const rd::value& hash, std::int64_t fresh_ms, region_health& health) {
  std::unordered_set<std::string> cannot;
  for_each_heartbeat(hash, [&](const std::string&, std::int64_t ms, const std::map<std::string, bool>& sees) {
    if (!health.heartbeat_ms || ms > *health.heartbeat_ms) health.heartbeat_ms = ms;
    if (ms < fresh_ms) return;
    for (const auto& [region, ok] : sees)
      if (!ok) cannot.insert(region);
  });
  health.cannot_see.assign(cannot.begin(), cannot.end());
  std::ranges::sort(health.cannot_see);
}

// A concurrency limit's slices (HGETALL): those at least now_slice - K are still held (leases.hpp, as the
// decide script drops the others).
std::uint64_t held_in_slices(const rd::value& slices, const limiter::lease_timing& timing,
                             std::int64_t now_us) {
  const std::int64_t oldest = now_us / timing.slice_us - timing.slices;
  std::uint64_t held = 0;
  const auto& fields = slices.elements;
  for (std::size_t f = 0; f + 1 < fields.size(); f += 2) {
    const auto slice = integer(fields[f].text);
    if (slice && *slice >= oldest) held += count_of(fields[f + 1]);
  }
  return held;
}

// A concurrency limit per holder: the slots (HGETALL) of the holders still live (ZRANGEBYSCORE).
std::uint64_t held_by_live_holders(const rd::value& live_holders, const rd::value& slots) {
  std::unordered_set<std::string> live;
  for (const auto& h : live_holders.elements) live.insert(core::cat("h", h.text));
  std::uint64_t held = 0;
  const auto& fields = slots.elements;
  for (std::size_t f = 0; f + 1 < fields.size(); f += 2)
    if (live.contains(fields[f].text)) held += count_of(fields[f + 1]);
  return held;
}

}  // namespace remote_reads_parse

std::string heartbeat_key(std::string_view key_prefix, std::string_view region) {
  return core::cat(key_prefix, "sluice_region:", region);
}

std::string encode_heartbeat(std::int64_t unix_ms, const std::map<std::string, bool>& sees) {
  std::string out = core::cat(unix_ms, "|");
  bool first = true;
  for (const auto& [region, ok] : sees) {
    if (!first) out += ',';
    first = false;
    out += core::cat(region, "=", ok ? "1" : "0");
  }
  return out;
}

bool decode_heartbeat(std::string_view text, std::int64_t& unix_ms, std::map<std::string, bool>& sees) {
  const auto bar = text.find('|');
  if (bar == std::string_view::npos) return false;
  const auto ms = remote_reads_parse::integer(text.substr(0, bar));
  if (!ms) return false;
  unix_ms = *ms;
  auto rest = text.substr(bar + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    const auto equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0 || item.substr(equals + 1).size() != 1) return false;
    const char flag = item[equals + 1];
    if (flag != '0' && flag != '1') return false;
    sees[std::string(item.substr(0, equals))] = flag == '1';
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return true;
}

void order_for_reads(std::vector<key_read>& keys) {
  std::vector<key_read> ordered;
  ordered.reserve(keys.size());
  for (const auto kind : {remote_kind::counter, remote_kind::leases, remote_kind::holders}) {
    for (const auto& k : keys)
      if (k.how->kind == kind) ordered.push_back(k);
  }
  keys = std::move(ordered);
}

void push_remote_reads(rd::request& out, std::string_view heartbeat, std::span<const key_read> keys,
                       std::int64_t now_us) {
  out.push({"INFO", "replication"});
  out.push({"HGETALL", heartbeat});
  std::vector<std::string_view> mget{"MGET"};
  std::size_t i = 0;
  for (; i < keys.size() && keys[i].how->kind == remote_kind::counter; ++i) {
    mget.push_back(*keys[i].key);
    if (mget.size() > mget_chunk) {
      out.push(mget);
      mget.resize(1);
    }
  }
  if (mget.size() > 1) out.push(mget);
  const auto now = std::to_string(now_us);
  for (; i < keys.size(); ++i) {
    if (keys[i].how->kind == remote_kind::leases) {
      out.push({"HGETALL", *keys[i].key});
    } else {
      out.push({"ZRANGEBYSCORE", *keys[i].key, core::cat("(", now), "+inf"});
      out.push({"HGETALL", holder_slots_key(*keys[i].key)});
    }
  }
}

bool read_remote_replies(std::span<const rd::value> replies, std::span<const key_read> keys,
                         std::int64_t now_us, std::int64_t fresh_ms, region_health& health,
                         std::vector<std::uint64_t>& totals, std::string& error) {
  using kind = rd::value::kind;
  using remote_reads_parse::count_of;
  totals.assign(keys.size(), 0);
  for (const auto& r : replies) {
    if (r.is_error()) {
      error = r.text.empty() ? "an empty error reply" : r.text;
      return false;
    }
  }
  std::size_t at = 0;
  if (replies.size() < 2 || replies[0].type != kind::bulk_string || replies[1].type != kind::array) {
    error = "unexpected reply to INFO replication or HGETALL";
    return false;
  }
  remote_reads_parse::read_info(replies[at++].text, health);
  remote_reads_parse::read_heartbeats(replies[at++], fresh_ms, health);
  std::size_t i = 0;
  while (i < keys.size() && keys[i].how->kind == remote_kind::counter) {
    if (at >= replies.size() || replies[at].type != kind::array) {
      error = "unexpected reply to MGET";
      return false;
    }
    for (const auto& v : replies[at].elements) {
      if (i >= keys.size()) break;
      totals[i++] = count_of(v);
    }
    ++at;
  }
  for (; i < keys.size(); ++i) {
    const auto& how = *keys[i].how;
    if (at >= replies.size() || replies[at].type != kind::array) {
      error = "unexpected reply to a concurrency key's read";
      return false;
    }
    if (how.kind == remote_kind::leases) {
      totals[i] = remote_reads_parse::held_in_slices(replies[at++], how.timing, now_us);
    } else {
      if (at + 1 >= replies.size() || replies[at + 1].type != kind::array) {
        error = "unexpected reply to a holder set's read";
        return false;
      }
      totals[i] = remote_reads_parse::held_by_live_holders(replies[at], replies[at + 1]);
      at += 2;
    }
  }
  return true;
}

}  // namespace sluice::ratelimit::backends::redis
