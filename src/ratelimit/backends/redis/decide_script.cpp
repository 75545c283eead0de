#include "ratelimit/backends/redis/decide_script.hpp"

#include <openssl/sha.h>

#include <charconv>
#include <vector>

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

// A group in mode "a" or "e" works on an overlay of the keys (`mine`), merged only when it applies. Numbers
// go back to Redis through %.0f: Lua's tostring would write 1e+15 from 10^15.
const std::string_view decide_script = R"lua(
local cap = 4503599627370496
local known, existed, dirty = {}, {}, {}
local function stored(k)
  local v = known[k]
  if v == nil then
    local raw = redis.call('GET', k)
    existed[k] = raw ~= false
    v = tonumber(raw or '0') or 0
    known[k] = v
  end
  return v
end
local reply = {}
local k, a = 1, 1
while a <= #ARGV do
  local mode, now, count = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  local head = #reply + 1
  reply[head] = 1
  local mine, changes, all = {}, {}, true
  local function read(key)
    local v = mine[key]
    if v == nil then v = stored(key) end
    return v
  end
  for _ = 1, count do
    local kind, hits, refund = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
    local limit, window, tolerance = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
    local ttl = ARGV[a + 6]
    a = a + 7
    local key = KEYS[k]
    k = k + 1
    local value, previous, before, ok = 0, 0, 0, true
    if kind == 'g' then
      local tat = math.max(read(key), now)
      if refund then
        value = math.max(tat - math.min(hits * window, cap), now)
      else
        value = math.min(tat + hits * window, cap)
        ok = value - tolerance <= now
      end
    else
      if kind == 's' then
        previous = read(KEYS[k])
        k = k + 1
      end
      before = read(key)
      if refund then
        value = before - math.min(before, hits)
      else
        value = before + hits
        local weighted = 0
        if kind == 's' then weighted = math.ceil(previous * (window - now % window) / window) end
        ok = value + weighted <= limit
      end
    end
    if mode == 'a' or mode == 'e' or ok or kind == 'c' then
      mine[key] = value
      changes[#changes + 1] = {key, value, kind, ttl, refund, now}
    end
    all = all and ok
    reply[#reply + 1] = value
    reply[#reply + 1] = previous
    reply[#reply + 1] = before
  end
  if mode == 'e' or (mode == 'a' and not all) then
    reply[head] = 0
  else
    for _, c in ipairs(changes) do
      known[c[1]] = c[2]
      local d = dirty[c[1]]
      if d == nil then
        d = {}
        dirty[c[1]] = d
      end
      d.value, d.kind, d.now = c[2], c[3], c[6]
      if not c[5] then d.ttl = c[4] end
    end
  end
end
for key, d in pairs(dirty) do
  if d.kind == 'g' then
    if d.value > d.now then
      redis.call('SET', key, string.format('%.0f', d.value), 'PX', math.ceil((d.value - d.now) / 1000) + 1)
    else
      redis.call('DEL', key)
    end
  elseif d.ttl then
    if d.value > 0 or existed[key] then redis.call('SET', key, string.format('%.0f', d.value), 'EX', d.ttl) end
  elseif existed[key] then
    redis.call('SET', key, string.format('%.0f', d.value), 'KEEPTTL')
  end
end
return reply
)lua";

std::string_view decide_script_sha() {
  static const std::string sha = [] {
    unsigned char digest[SHA_DIGEST_LENGTH];
    SHA1(reinterpret_cast<const unsigned char*>(decide_script.data()), decide_script.size(), digest);
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char b : digest) {
      out.push_back(hex[b >> 4]);
      out.push_back(hex[b & 15]);
    }
    return out;
  }();
  return sha;
}

void push_decide(rd::request& out, std::span<const script_group> groups, bool whole) {
  std::size_t ops = 0, keys = 0;
  for (const auto& g : groups) {
    ops += g.indexes.size();
    for (auto i : g.indexes) keys += g.ops[i].kind == limiter::op_kind::sliding ? 2 : 1;
  }
  // Every number's text lives in one buffer sized up front, so the views into it stay valid.
  std::string numbers;
  numbers.reserve((ops * 5 + groups.size() * 2 + 1) * 21);
  auto number = [&](std::int64_t n) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
    const std::size_t at = numbers.size();
    numbers.append(buf, static_cast<std::size_t>(end - buf));
    return std::string_view(numbers).substr(at);
  };
  std::vector<std::string_view> args;
  args.reserve(3 + keys + groups.size() * 3 + ops * 7);
  args.push_back(whole ? "EVAL" : "EVALSHA");
  args.push_back(whole ? decide_script : decide_script_sha());
  args.push_back(number(static_cast<std::int64_t>(keys)));
  for (const auto& g : groups) {
    for (auto i : g.indexes) {
      args.push_back(g.ops[i].key);
      if (g.ops[i].kind == limiter::op_kind::sliding) args.push_back(g.ops[i].previous_key);
    }
  }
  for (const auto& g : groups) {
    args.push_back(g.mode == limiter::batch_mode::all_or_nothing  ? "a"
                   : g.mode == limiter::batch_mode::evaluate_only ? "e"
                                                                  : "i");
    args.push_back(number(g.ops[g.indexes.front()].now_us));
    args.push_back(number(static_cast<std::int64_t>(g.indexes.size())));
    for (auto i : g.indexes) {
      const auto& op = g.ops[i];
      args.push_back(op.kind == limiter::op_kind::gcra      ? "g"
                     : op.kind == limiter::op_kind::sliding ? "s"
                                                            : "c");
      args.push_back(number(static_cast<std::int64_t>(op.increment)));
      args.push_back(op.refund ? "1" : "0");
      args.push_back(number(static_cast<std::int64_t>(op.limit)));
      args.push_back(number(op.window_us));
      args.push_back(number(op.tolerance_us));
      args.push_back(number(op.ttl_seconds));
    }
  }
  out.push(std::span<const std::string_view>(args.data(), args.size()));
}

std::optional<bool> read_decide_reply(const rd::value& reply, std::size_t& at, std::span<const std::size_t> indexes,
                                      std::span<limiter::op_result> results) {
  const auto& e = reply.elements;
  if (reply.type != rd::value::kind::array || e.size() < at + 1 + 3 * indexes.size()) return std::nullopt;
  for (std::size_t j = at; j < at + 1 + 3 * indexes.size(); ++j) {
    if (e[j].type != rd::value::kind::integer || e[j].integer < 0) return std::nullopt;
  }
  const bool applied = e[at].integer == 1;
  ++at;
  for (auto index : indexes) {
    results[index].value = static_cast<std::uint64_t>(e[at].integer);
    results[index].previous = static_cast<std::uint64_t>(e[at + 1].integer);
    results[index].before = static_cast<std::uint64_t>(e[at + 2].integer);
    at += 3;
  }
  return applied;
}

}  // namespace sluice::ratelimit::backends::redis
