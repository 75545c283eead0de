// The decide script's Lua text and its SHA1 (decide_script.cpp encodes its calls and reads its replies).
#include "ratelimit/backends/redis/decide_script.hpp"

#include <openssl/sha.h>

#include <string>

namespace sluice::ratelimit::backends::redis {

// A group in mode "a" or "e" works on an overlay of the keys (`mine`), merged only when it applies. Printing
// a number costs Redis more than the command it goes into (Lua's string.format, or Redis's own %.17g for a
// number argument), so a counter's only change in a call, when it holds an integer, is written as INCRBY of
// the hits Sluice sent and EXPIRE. Other counters are printed with %.0f (Lua's tostring would write 1e+15
// from 10^15). A GCRA key holds its arrival time in gcra_command.hpp's binary form.
const std::string_view decide_script = R"lua(
local cap = 4503599627370496
local max, min, ceil, floor, tonumber, unpack = math.max, math.min, math.ceil, math.floor, tonumber, unpack
local raw, known, existed, odd = {}, {}, {}, {}
local dirty_kind, dirty_ttl, dirty_now, plain = {}, {}, {}, {}
-- Every key is read first, by MGETs of up to 1000 keys (unpack stops near 8000). A key holding another type
-- reads as absent, and is overwritten if changed.
local nkeys = #KEYS
for first = 1, nkeys, 1000 do
  local last = min(first + 999, nkeys)
  local got = redis.call('MGET', unpack(KEYS, first, last))
  for i = first, last do raw[KEYS[i]] = got[i - first + 1] end
end
-- A key's value when first used: a GCRA key's first 8 bytes, big-endian, in 52 bits; a counter's decimal.
local function stored(key, kind)
  local v = known[key]
  if v ~= nil then return v end
  local text = raw[key]
  v = 0
  if text then
    existed[key] = true
    if kind == 'g' then
      local b = {text:byte(1, 8)}
      for i = 1, 8 do v = v * 256 + (b[i] or 0) end
      v = v % 4503599627370496
    else
      v = tonumber(text) or 0
      -- Not a count INCRBY can add to (negative: a late take-back; or not an integer): printed when written.
      if v < 0 or v % 1 ~= 0 then odd[key], v = true, max(v, 0) end
    end
  end
  known[key] = v
  return v
end
local function gcra_bytes(v)
  local hi = floor(v / 4294967296)
  local lo = v - hi * 4294967296
  return string.char(floor(hi / 16777216) % 256, floor(hi / 65536) % 256, floor(hi / 256) % 256, hi % 256,
    floor(lo / 16777216), floor(lo / 65536) % 256, floor(lo / 256) % 256, lo % 256)
end
-- A counter's first change in this call may be written as INCRBY of its hits (p); a second one is printed.
local function change(key, value, kind, ttl, refund, now, p)
  known[key] = value
  if dirty_kind[key] then p = false end
  dirty_kind[key], dirty_now[key], plain[key] = kind, now, p or false
  if not refund then dirty_ttl[key] = ttl end
end
-- When the leases of a slice's acquisitions end (limiter/leases.hpp, slice_lease_end_us).
local function leases_end(slice, slices, slice_us)
  return (slice + slices + 1) * slice_us
end
-- A concurrency limit's leases (limiter/leases.hpp): a HASH of slice number -> acquisitions. Slices past the
-- lease are dropped; a release takes from the oldest; an acquisition that would pass the limit takes nothing.
-- -> slots held after (were it applied), before, expired, when the oldest lease held ends (µs; 0: none).
local function lease_op(key, now, hits, refund, spec)
  local limit, slice_us, slices = spec[2], spec[3], spec[4]
  local now_slice = floor(now / slice_us)
  local raw = redis.call('HGETALL', key)
  local held, counts = {}, {}
  local expired, before = 0, 0
  for f = 1, #raw, 2 do
    local s, c = tonumber(raw[f]), tonumber(raw[f + 1])
    if s < now_slice - slices then
      expired = expired + c
      redis.call('HDEL', key, raw[f])
    else
      held[#held + 1] = s
      counts[s] = c
      before = before + c
    end
  end
  table.sort(held)
  local value = before
  if refund then
    local left = hits
    while left > 0 and #held > 0 do
      local s = held[1]
      local take = min(left, counts[s])
      left = left - take
      counts[s] = counts[s] - take
      if counts[s] == 0 then
        redis.call('HDEL', key, s)
        table.remove(held, 1)
      else
        redis.call('HINCRBY', key, s, -take)
      end
    end
    value = before - (hits - left)
  else
    value = before + hits
    local judged = 0
    if hits == 0 then judged = 1 end
    if value + judged <= limit and hits > 0 then
      redis.call('HINCRBY', key, now_slice, hits)
      if held[#held] ~= now_slice then held[#held + 1] = now_slice end
    end
  end
  if #held == 0 then
    if #raw > 0 then redis.call('DEL', key) end
    return value, before, expired, 0
  end
  -- Gone a second after its newest slice's lease ends.
  redis.call('PEXPIRE', key, ceil((leases_end(held[#held], slices, slice_us) - now) / 1000) + 1000)
  return value, before, expired, leases_end(held[1], slices, slice_us)
end
-- A concurrency limit's leases per holder (holder_key; limiter/leases.hpp, apply_holder_op): a ZSET of
-- holder -> lease end (µs) and, under the same hash tag, a HASH of 'h'..holder -> slots and 'n' -> their
-- total. Leases that have ended are dropped first; a release frees its holder's slots; an acquisition takes
-- what its holder does not hold yet, when that fits, and renews the holder's lease.
-- -> slots held after (were it applied), before, expired, the oldest lease's end (0: none), holders after,
-- what the holder held before.
local function holder_op(zkey, hkey, now, hits, refund, spec, holder)
  local limit, lease = spec[2], spec[3]
  local expired = 0
  local ended = redis.call('ZRANGEBYSCORE', zkey, '-inf', now)
  if #ended > 0 then
    for i = 1, #ended do
      local field = 'h' .. ended[i]
      expired = expired + (tonumber(redis.call('HGET', hkey, field)) or 0)
      redis.call('HDEL', hkey, field)
    end
    redis.call('ZREMRANGEBYSCORE', zkey, '-inf', now)
    redis.call('HINCRBY', hkey, 'n', -expired)
  end
  local before = tonumber(redis.call('HGET', hkey, 'n')) or 0
  local field = 'h' .. holder
  local mine = tonumber(redis.call('HGET', hkey, field)) or 0
  local value = before
  if refund then
    if mine > 0 then
      value = before - mine
      redis.call('ZREM', zkey, holder)
      redis.call('HDEL', hkey, field)
      redis.call('HINCRBY', hkey, 'n', -mine)
    end
  else
    local extra = max(hits - mine, 0)
    value = before + extra
    local judged = 0
    if hits == 0 then judged = 1 end
    if value + judged <= limit and hits > 0 then
      redis.call('ZADD', zkey, now + lease, holder)
      if extra > 0 then
        redis.call('HINCRBY', hkey, field, extra)
        redis.call('HINCRBY', hkey, 'n', extra)
      end
    end
  end
  local holders = redis.call('ZCARD', zkey)
  if holders == 0 then
    redis.call('DEL', zkey, hkey)
    return value, before, expired, 0, 0, mine
  end
  -- Both keys go a second after the latest lease ends.
  local last = redis.call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
  local first = redis.call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
  local ttl = ceil((tonumber(last[2]) - now) / 1000) + 1000
  redis.call('PEXPIRE', zkey, ttl)
  redis.call('PEXPIRE', hkey, ttl)
  return value, before, expired, tonumber(first[2]), holders, mine
end
local specs = {}
local a = 2
-- A spec: kind, limit, window or interval, tolerance (a sliding window: its start when it is a calendar window,
-- else 0), and whether it is usage (its kind in upper case: every
-- op applies, whatever the verdict; a check of 0 hits is judged as one hit).
for s = 1, tonumber(ARGV[1]) do
  local kind = ARGV[a]
  local lower = kind:lower()
  specs[s] = {lower, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), kind ~= lower}
  a = a + 4
end
local reply, n = {}, 0
local k = 1
-- A run: m groups in a row of the same independent GCRA ops (keys, specs, hits), which differ only in their
-- time, as a hot descriptor's decisions do. Worked as m groups in mode "i" would be, for a third of the cost.
local function run(a)
  local m, c = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  a = a + 3
  local keys, cur, step, tol, last = {}, {}, {}, {}, {}
  for i = 1, c do
    local spec = specs[tonumber(ARGV[a])]
    step[i], tol[i] = tonumber(ARGV[a + 1]) * spec[3], spec[4]
    a = a + 2
    keys[i], k = KEYS[k], k + 1
    cur[i] = stored(keys[i], 'g')
  end
  for _ = 1, m do
    local now = tonumber(ARGV[a])
    a = a + 1
    n = n + 1
    reply[n] = 1
    for i = 1, c do
      local value = min(max(cur[i], now) + step[i], cap)
      if value - tol[i] <= now then cur[i], last[i] = value, now end
      n = n + 1
      reply[n] = value
    end
  end
  for i = 1, c do
    if last[i] then change(keys[i], cur[i], 'g', tol[i], false, last[i], nil) end
  end
  return a
end
while a <= #ARGV do
  if ARGV[a] == 'r' then
    a = run(a)
  else
    local mode, now, count = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 3
    n = n + 1
    local head = n
    reply[head] = 1
    local each = mode == 'i'
    -- An all-or-nothing group works on an overlay, merged only when the request's verdict admits.
    local mine, keys, values, kinds, ttls, refunds, changes, plains, usages
    if not each then
      mine, keys, values, kinds, ttls, refunds, changes, plains, usages = {}, {}, {}, {}, {}, {}, {}, {}, {}
    end
    local enforced_ok, quota = true, nil
    for i = 1, count do
      local tagged = tonumber(ARGV[a])
      local index = tagged % 16777216
      local role = (tagged - index) / 16777216
      local spec, hits_text = specs[index], ARGV[a + 1]
      local hits = tonumber(hits_text)
      local refund = hits_text:byte() == 45
      a = a + 2
      local kind, usage = spec[1], spec[5]
      local judged = (usage and hits == 0) and 1 or 0
      if refund then hits = -hits end
      local key = KEYS[k]
      k = k + 1
      local current = 0
      if kind ~= 'k' and kind ~= 'h' then
        current = mine and mine[key]
        if current == nil then current = stored(key, kind) end
      end
      local value, ok, ttl, p = 0, true, nil, nil
      if kind == 'k' then
        if not each then error('a concurrency limit in an all-or-nothing group') end
        local before, expired, oldest
        value, before, expired, oldest = lease_op(key, now, hits, refund, spec)
        n = n + 4
        reply[n - 3], reply[n - 2], reply[n - 1], reply[n] = value, before, expired, oldest
      elseif kind == 'h' then
        if not each then error('a concurrency limit in an all-or-nothing group') end
        local holder = ARGV[a]
        a = a + 1
        local slots_key = KEYS[k]
        k = k + 1
        local before, expired, oldest, holders, mine
        value, before, expired, oldest, holders, mine = holder_op(key, slots_key, now, hits, refund, spec, holder)
        n = n + 6
        reply[n - 5], reply[n - 4], reply[n - 3], reply[n - 2], reply[n - 1], reply[n] =
          value, before, expired, oldest, holders, mine
      elseif kind == 'g' then
        ttl = spec[4]
        local tat = max(current, now)
        if refund then
          value = max(tat - min(hits * spec[3], cap), now)
        else
          value = min(tat + hits * spec[3], cap)
          ok = min(value + judged * spec[3], cap) - spec[4] <= now
          -- Usage may leave the arrival time past the bucket: the key lives until it has passed.
          if usage then ttl = max(ttl, value - now) end
        end
        n = n + 1
        reply[n] = value
      else
        ttl = ARGV[a]
        a = a + 1
        local previous = 0
        if kind == 's' then
          previous = mine and mine[KEYS[k]]
          if previous == nil then previous = stored(KEYS[k], kind) end
          k = k + 1
        end
        if refund then
          value = current - min(current, hits)
        else
          value = current + hits
          local weighted = 0
          if kind == 's' then
            local window, start = spec[3], spec[4]
            local elapsed = now % window
            if start > 0 then elapsed = now - start end
            weighted = ceil(previous * (window - elapsed) / window)
          end
          ok = value + judged + weighted <= spec[2]
          if not odd[key] then p = hits_text end
        end
        n = n + 1
        reply[n] = value
        if kind == 's' then
          n = n + 1
          reply[n] = previous
        end
        n = n + 1
        reply[n] = current
      end
      -- Fixed-window counters and usage count every hit; the others change only when they admit.
      -- (leases are written by lease_op and holder_op)
      local applies = (ok or kind == 'c' or usage) and kind ~= 'k' and kind ~= 'h'
      if each then
        if applies then change(key, value, kind, ttl, refund, now, p) end
      else
        if applies then mine[key] = value end
        keys[i], values[i], kinds[i], ttls[i], refunds[i], changes[i], plains[i], usages[i] =
          key, value, kind, ttl, refund, applies, p, usage
        if role == 0 then
          enforced_ok = enforced_ok and ok
        elseif role >= 2 then
          quota = quota or {}
          quota[role] = ok and quota[role] ~= false
        end
      end
    end
    if not each then
      -- The request's verdict (op_role): every enforced op admits, and some quota descriptor has room.
      local admit = enforced_ok
      if admit and quota then
        admit = false
        for _, room in pairs(quota) do admit = admit or room end
      end
      local applied = mode ~= 'e' and admit
      if not applied then reply[head] = 0 end
      -- Usage was spent: it counts whatever the verdict.
      for i = 1, count do
        if changes[i] and (applied or usages[i]) then
          change(keys[i], values[i], kinds[i], ttls[i], refunds[i], now, plains[i])
        end
      end
    end
  end
end
for key, kind in pairs(dirty_kind) do
  local value, p = known[key], plain[key]
  if kind == 'g' then
    local now = dirty_now[key]
    local tolerance = dirty_ttl[key]
    if value <= now and not existed[key] then
      -- A full bucket (an arrival time passed) on an absent key: it stays absent.
    elseif tolerance then
      -- The TTL every write gives a GCRA key (gcra_command.hpp, gcra_ttl_ms): τ + 1 ms + one second. Never
      -- shorter: a worker may skip its PEXPIREs for that second (gcra_expiry.hpp).
      redis.call('SET', key, gcra_bytes(value), 'PX', ceil(tolerance / 1000) + 1001)
    else
      -- Only given back (negative hits): the TTL an earlier write set still covers the arrival time.
      redis.call('SET', key, gcra_bytes(value), 'KEEPTTL')
    end
  elseif value <= 0 and not existed[key] then
    -- Nothing counted on an absent key: it stays absent.
  elseif p and type(redis.pcall('INCRBY', key, p)) == 'number' then
    -- (A value INCRBY refuses, such as " 7", is printed instead.)
    redis.call('EXPIRE', key, dirty_ttl[key])
  elseif dirty_ttl[key] then
    redis.call('SET', key, string.format('%.0f', value), 'EX', dirty_ttl[key])
  else
    redis.call('SET', key, string.format('%.0f', value), 'KEEPTTL')
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

}  // namespace sluice::ratelimit::backends::redis
