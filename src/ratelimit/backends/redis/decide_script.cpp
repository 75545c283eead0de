#include "ratelimit/backends/redis/decide_script.hpp"

#include <openssl/sha.h>

#include <boost/container/small_vector.hpp>
#include <charconv>
#include <optional>
#include <string>

namespace sluice::ratelimit::backends::redis {

namespace rd = sluice::redis;

// Numbers go back to Redis through %.0f: Lua's tostring would write 1e+15 from 10^15.
const std::string_view decide_script = R"lua(
local mode, now = ARGV[1], tonumber(ARGV[2])
local cap = 4503599627370496
local known = {}
local function read(k)
  local v = known[k]
  if v == nil then
    v = tonumber(redis.call('GET', k) or '0') or 0
    known[k] = v
  end
  return v
end
local function text(n) return string.format('%.0f', n) end
local reply, changes, all = {1}, {}, true
local k = 1
for a = 3, #ARGV, 7 do
  local kind, hits, refund = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
  local limit, window, tolerance = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
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
    local current = read(key)
    before = current
    if refund then
      value = current - math.min(current, hits)
    else
      value = current + hits
      local weighted = 0
      if kind == 's' then weighted = math.ceil(previous * (window - now % window) / window) end
      ok = value + weighted <= limit
    end
  end
  local apply = mode == 'a' or (mode == 'i' and (ok or kind == 'c'))
  if apply then
    known[key] = value
    changes[#changes + 1] = {kind, key, value, ARGV[a + 6], refund}
  end
  all = all and ok
  reply[#reply + 1] = value
  reply[#reply + 1] = previous
  reply[#reply + 1] = before
end
if mode == 'e' or (mode == 'a' and not all) then
  reply[1] = 0
  return reply
end
for _, c in ipairs(changes) do
  if c[1] == 'g' then
    if c[3] > now then
      redis.call('SET', c[2], text(c[3]), 'PX', math.ceil((c[3] - now) / 1000) + 1)
    else
      redis.call('DEL', c[2])
    end
  elseif c[5] then
    if redis.call('EXISTS', c[2]) == 1 then redis.call('SET', c[2], text(c[3]), 'KEEPTTL') end
  elseif c[3] > 0 then
    redis.call('SET', c[2], text(c[3]), 'EX', c[4])
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

void push_decide(rd::request& out, std::span<const limiter::counter_op> ops,
                 std::span<const std::size_t> indexes, limiter::batch_mode mode, bool whole) {
  // Every number's text lives in one buffer reserved up front, so the views into it stay valid.
  std::string numbers;
  numbers.reserve(indexes.size() * 6 * 21 + 21);
  auto number = [&](std::int64_t n) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
    const std::size_t at = numbers.size();
    numbers.append(buf, static_cast<std::size_t>(end - buf));
    return std::string_view(numbers).substr(at);
  };
  std::size_t key_count = 0;
  for (auto i : indexes) key_count += ops[i].kind == limiter::op_kind::sliding ? 2 : 1;
  boost::container::small_vector<std::string_view, 64> args;
  args.push_back(whole ? "EVAL" : "EVALSHA");
  args.push_back(whole ? decide_script : decide_script_sha());
  const std::string_view count_text = number(static_cast<std::int64_t>(key_count));
  args.push_back(count_text);
  for (auto i : indexes) {
    args.push_back(ops[i].key);
    if (ops[i].kind == limiter::op_kind::sliding) args.push_back(ops[i].previous_key);
  }
  args.push_back(mode == limiter::batch_mode::all_or_nothing  ? "a"
                 : mode == limiter::batch_mode::evaluate_only ? "e"
                                                              : "i");
  args.push_back(number(ops[indexes.front()].now_us));
  for (auto i : indexes) {
    const auto& op = ops[i];
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
  out.push(std::span<const std::string_view>(args.data(), args.size()));
}

std::optional<bool> read_decide_reply(const rd::value& reply, std::span<const std::size_t> indexes,
                                      std::span<limiter::op_result> results) {
  const auto& e = reply.elements;
  if (reply.type != rd::value::kind::array || e.size() != 1 + 3 * indexes.size()) return std::nullopt;
  for (const auto& v : e) {
    if (v.type != rd::value::kind::integer || v.integer < 0) return std::nullopt;
  }
  for (std::size_t j = 0; j < indexes.size(); ++j) {
    results[indexes[j]].value = static_cast<std::uint64_t>(e[1 + 3 * j].integer);
    results[indexes[j]].previous = static_cast<std::uint64_t>(e[2 + 3 * j].integer);
    results[indexes[j]].before = static_cast<std::uint64_t>(e[3 + 3 * j].integer);
  }
  return e[0].integer == 1;
}

}  // namespace sluice::ratelimit::backends::redis
