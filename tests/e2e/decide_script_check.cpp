// Differential check of the Redis decide script and of GCRA's BITFIELD (gcra_command.hpp) against the memory
// store, which runs limiter/algorithms.hpp: random calls of one to three groups (each mode, every op kind,
// with and without usage accounting, hits 0 to 3, refunds, every op role, keys shared within and across
// groups) go to a real Redis as one EVAL — or, in "plain" rounds, group by group with independent GCRA ops as
// BITFIELD — and to the memory store group by group, on the same fake clock. "Hot" rounds send 2 to 6
// independent groups of the same GCRA ops, 20 ms apart (the script's runs). Every op's result, every group's
// applied flag and every key's value afterwards must be the same. Usage: decide_script_check PORT SEED
// ROUNDS. Exits 0 when all agree, 1 at the first difference.
//
// Keys never expire during a run: counters live an hour, and the fake clock only runs ahead of the real one,
// so a GCRA key Redis expires (by real time) has an arrival time already past on the fake clock too — but for
// the real time a round itself takes, which the comparison allows for. The TTLs
// are checked as well: every write of a GCRA key (the script's SET, BITFIELD's PEXPIRE) gives it its
// tolerance + 1 ms + one second (gcra_ttl_ms), and none lasts longer; a counter lives its hour. A usage GCRA
// key (whose arrival time may run past its tolerance) must outlive its arrival time.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"
#include "ratelimit/backends/redis/decide_script.hpp"
#include "ratelimit/backends/redis/gcra_command.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "redis/resp.hpp"

namespace {

using namespace sluice;
using namespace sluice::ratelimit;
using limiter::batch_mode;
using limiter::counter_op;
using limiter::op_kind;
using limiter::op_result;

struct recorder final : limiter::completion {
  std::optional<std::string> error;
  void complete(const limiter::backend_error* e) noexcept override {
    if (e != nullptr) error = e->message;
  }
};

class connection {
 public:
  explicit connection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("connect");
  }
  ~connection() { ::close(fd_); }

  redis::value call(const std::string& payload) {
    for (std::size_t sent = 0; sent < payload.size();) {
      const auto n = ::write(fd_, payload.data() + sent, payload.size() - sent);
      if (n <= 0) fail("write");
      sent += static_cast<std::size_t>(n);
    }
    for (;;) {
      std::size_t consumed = 0;
      redis::value out;
      std::string error;
      const auto status = redis::parse_reply(buffer_, consumed, out, error);
      if (status == redis::parse_status::complete) {
        buffer_.erase(0, consumed);
        return out;
      }
      if (status == redis::parse_status::protocol_error) fail(error.c_str());
      char chunk[65536];
      const auto n = ::read(fd_, chunk, sizeof chunk);
      if (n <= 0) fail("read");
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  [[noreturn]] static void fail(const char* what) {
    std::cerr << "redis connection: " << what << "\n";
    std::exit(2);
  }
  int fd_;
  std::string buffer_;
};

std::int64_t real_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What is wrong with a key's PTTL (ms; -2 absent, -1 none), if anything. A GCRA key's TTL is `want_ms`
// (gcra_ttl_ms of its one limit) less the real time since it was last given, at most; `written`: it was given
// in this round (an admitted op through the script, or any BITFIELD with its PEXPIRE), at most `since_ms` of
// real time ago (the round's start: a busy machine stretches a round). Otherwise it was kept (negative hits:
// KEEPTTL) from an earlier write.
std::optional<std::string> wrong_ttl(std::int64_t pttl, bool gcra, bool written, std::int64_t want_ms,
                                     std::uint64_t value, std::int64_t since_ms) {
  if (pttl == -2) return std::nullopt;
  if (!gcra) {
    // Negative hits keep the TTL a counter had, so it may be from an earlier round.
    if (pttl <= 3'000'000 || pttl > 3'600'000) return "has PTTL " + std::to_string(pttl) + ", not its hour";
    return std::nullopt;
  }
  if (pttl == -1 || pttl > want_ms || (written && pttl < want_ms - since_ms - 1))
    return "holds " + std::to_string(value) + " with PTTL " + std::to_string(pttl) + ", want " +
           std::to_string(want_ms) + (written ? " (written in this round)" : "");
  return std::nullopt;
}

struct group {
  std::size_t first, count;
  batch_mode mode;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: decide_script_check PORT SEED ROUNDS\n";
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const auto seed = std::strtoull(argv[2], nullptr, 10);
  const int rounds = std::atoi(argv[3]);
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };

  connection redis_connection(port);
  core::fake_clock clock;
  std::int64_t now_us = real_micros();
  clock.set_micros(now_us);
  backends::memory::memory_backend memory(clock, 100'000);
  const std::string prefix = "dsc" + std::to_string(seed) + "_" + std::to_string(now_us) + "_";
  std::size_t checked = 0;
  auto command = [&](std::initializer_list<std::string_view> parts) {
    redis::request r;
    r.push(parts);
    return redis_connection.call(r.payload());
  };

  for (int round = 0; round < rounds; ++round) {
    const std::int64_t round_started = real_micros();
    now_us = std::max(now_us + static_cast<std::int64_t>(pick(400'000)), round_started);
    clock.set_micros(now_us);
    const std::int64_t window = now_us / 1'000'000;  // sliding windows of one second

    std::deque<std::string> keys;  // the ops' keys, at stable addresses
    std::vector<counter_op> ops;
    std::vector<group> groups;
    // A "hot" round: independent groups in a row of the same GCRA ops, each 20 ms after the last, as a hot
    // descriptor's decisions come (the script takes them as one run).
    const bool hot = pick(4) == 0;
    const std::size_t group_count = hot ? 2 + pick(5) : 1 + pick(3);
    const std::size_t hot_width = 1 + pick(3);
    const std::array<std::uint64_t, 3> hot_hits{pick(3), pick(3), pick(3)};
    ops.reserve(group_count * 4);
    for (std::size_t g = 0; hot && g < group_count; ++g) {
      groups.push_back({ops.size(), hot_width, batch_mode::independent});
      for (std::size_t i = 0; i < hot_width; ++i) {
        counter_op op;
        op.now_us = now_us + static_cast<std::int64_t>(g) * 20'000;
        op.increment = hot_hits[i];
        const std::int64_t emission_us = i == 1 ? 250'000 : 100'000;  // as below, per key
        op.algorithm = limiter::gcra_op{emission_us, emission_us * static_cast<std::int64_t>(1 + i)};
        keys.push_back(prefix + "g" + std::to_string(i));
        op.key = keys.back();
        ops.push_back(op);
      }
    }
    if (hot) now_us = ops.back().now_us;
    for (std::size_t g = 0; !hot && g < group_count; ++g) {
      const auto mode =
          std::array{batch_mode::independent, batch_mode::all_or_nothing, batch_mode::evaluate_only}[pick(3)];
      groups.push_back({ops.size(), 1 + pick(4), mode});
      for (std::size_t i = 0; i < groups.back().count; ++i) {
        counter_op op;
        op.now_us = now_us;
        op.increment = pick(4);
        op.refund = pick(6) == 0;
        op.ttl_seconds = 3600;
        // Usage keys apart ("u"), as a rule's limit has one accounting.
        op.usage = pick(3) == 0;
        const auto n = std::to_string(pick(3)) + (op.usage ? "u" : "");
        // Concurrency limits in independent groups only (an all-or-nothing one is refused before the script).
        if (mode == batch_mode::independent && !op.usage && pick(5) == 0) {
          const std::uint64_t limit = n[0] == '1' ? 5 : 3;
          if (pick(2) == 0) {
            // Per holder (holder_key): a lease of 1.5 s per holder, among four holders.
            static constexpr std::string_view holders[] = {"h0", "h1", "h2", "h3"};
            op.algorithm = limiter::holder_op{limit, 1'500'000, holders[pick(4)]};
            keys.push_back(prefix + "kh" + n);
            op.key = keys.back();
            ops.push_back(op);
            continue;
          }
          op.algorithm = limiter::lease_op{limit, {1'000'000, 2}};  // slices of a second, a lease of two
          keys.push_back(prefix + "k" + n);
          op.key = keys.back();
          ops.push_back(op);
          continue;
        }
        switch (pick(3)) {
          case 0:
            op.algorithm = limiter::fixed_window_op{pick(2) == 0 ? 3u : 6u, 0};
            keys.push_back(prefix + "c" + n);
            break;
          case 1: {
            limiter::sliding_window_op sliding{5, 0, {}, 1'000'000, 0};
            // A calendar window's start (limiter/sliding_window.hpp, sliding_start) now and then.
            if (pick(3) == 0) sliding.window_start_us = now_us - static_cast<std::int64_t>(pick(1'000'000));
            keys.push_back(prefix + "s" + n + "_" + std::to_string(window));
            keys.push_back(prefix + "s" + n + "_" + std::to_string(window - 1));
            sliding.previous_key = keys.back();
            keys.push_back(prefix + "s" + n + "_" + std::to_string(window));
            op.algorithm = sliding;
            break;
          }
          default:
            // One limit per key, as rules have (BITFIELD's PEXPIRE is its limit's tolerance): key 0 every
            // 100 ms with a burst of 1, key 1 every 250 ms with 2, key 2 every 100 ms with 3.
            const std::int64_t emission_us = n[0] == '1' ? 250'000 : 100'000;
            op.algorithm = limiter::gcra_op{emission_us, emission_us * (1 + (n[0] - '0'))};
            keys.push_back(prefix + "g" + n);
            break;
        }
        op.key = keys.back();
        if (mode != batch_mode::independent) {
          const auto r = pick(10);
          op.role = r < 5   ? limiter::op_role::enforced
                    : r < 7 ? limiter::op_role::advisory
                            : limiter::op_role::first_quota + static_cast<std::uint32_t>(pick(2));
        }
        ops.push_back(op);
      }
    }

    // The memory store, group by group.
    std::vector<op_result> expected(ops.size());
    std::vector<bool> expected_applied;
    for (const auto& g : groups) {
      recorder r;
      const std::span<const counter_op> part(ops.data() + g.first, g.count);
      clock.set_micros(part.front().now_us);  // the store's own clock (expiry) at the group's time
      memory.increment(part, std::span<op_result>(expected.data() + g.first, g.count), r, g.mode);
      if (r.error) {
        std::cerr << "memory store: " << *r.error << "\n";
        return 2;
      }
      limiter::batch_verdict verdict;
      for (std::size_t i = g.first; i < g.first + g.count; ++i)
        verdict.add(ops[i], limiter::admits(ops[i], expected[i]));
      expected_applied.push_back(g.mode == batch_mode::independent ||
                                 (g.mode == batch_mode::all_or_nothing && verdict.applies()));
    }

    // Redis: in one call of the script; or, in a "plain" round, group by group, each GCRA op of an
    // independent group as the backend sends it (gcra_command.hpp's BITFIELD) and every other op and group
    // through the script, so both forms meet on the same keys.
    const bool plain = pick(2) == 0;
    const std::int64_t sent_real = real_micros();
    std::vector<std::vector<std::size_t>> indexes;
    for (const auto& g : groups) {
      auto& list = indexes.emplace_back();
      for (std::size_t i = g.first; i < g.first + g.count; ++i) list.push_back(i);
    }
    std::vector<op_result> got(ops.size());
    std::vector<std::optional<bool>> applied(groups.size());
    auto script = [&](std::span<const backends::redis::script_group> script_groups) {
      redis::request request;
      backends::redis::push_decide(request, script_groups, true);
      return redis_connection.call(request.payload());
    };
    std::string failed;
    if (!plain) {
      std::vector<backends::redis::script_group> script_groups;
      for (std::size_t k = 0; k < groups.size(); ++k)
        script_groups.push_back({ops, indexes[k], groups[k].mode});
      const auto reply = script(script_groups);
      if (reply.is_error()) failed = reply.text;
      std::size_t at = 0;
      for (std::size_t k = 0; k < groups.size() && failed.empty(); ++k)
        applied[k] = backends::redis::read_decide_reply(reply, at, ops, indexes[k], got);
    }
    for (std::size_t k = 0; plain && k < groups.size() && failed.empty(); ++k) {
      if (groups[k].mode != batch_mode::independent) {
        const backends::redis::script_group g{ops, indexes[k], groups[k].mode};
        const auto reply = script({&g, 1});
        std::size_t at = 0;
        if (reply.is_error()) failed = reply.text;
        applied[k] = backends::redis::read_decide_reply(reply, at, ops, indexes[k], got);
        continue;
      }
      applied[k] = true;
      for (auto i : indexes[k]) {
        if (ops[i].kind() != op_kind::gcra || ops[i].usage) {  // usage GCRA goes through the script too
          const std::size_t one[] = {i};
          const backends::redis::script_group g{ops, one, batch_mode::independent};
          const auto reply = script({&g, 1});
          std::size_t at = 0;
          if (reply.is_error()) failed = reply.text;
          if (!backends::redis::read_decide_reply(reply, at, ops, one, got)) applied[k] = std::nullopt;
          continue;
        }
        redis::request request;
        backends::redis::push_gcra(request, ops[i]);
        backends::redis::push_gcra_expiry(request, ops[i]);  // as the backend does when it is due
        const auto reply = redis_connection.call(request.payload());
        const auto expire = redis_connection.call({});  // PEXPIRE's reply
        if (reply.is_error() || expire.is_error()) failed = reply.is_error() ? reply.text : expire.text;
        if (!backends::redis::read_gcra(reply, ops[i], got[i])) applied[k] = std::nullopt;
      }
    }
    if (!failed.empty()) {
      std::cerr << "round " << round << ": Redis answered " << failed << "\n";
      return 1;
    }
    for (std::size_t k = 0; k < groups.size(); ++k) {
      auto where = [&](std::size_t i) {
        const auto& op = ops[i];
        return "round " + std::to_string(round) + ", group " + std::to_string(k) + " (mode " +
               std::to_string(static_cast<int>(groups[k].mode)) + "), op " + std::to_string(i) + " (kind " +
               std::to_string(static_cast<int>(op.kind())) + ", key " + std::string(op.key) + ", hits " +
               (op.refund ? "-" : "") + std::to_string(op.increment) + ", role " + std::to_string(op.role) +
               ")";
      };
      if (!applied[k]) {
        std::cerr << "round " << round << ", group " << k << ": not the reply of the script or of BITFIELD\n";
        return 1;
      }
      if (*applied[k] != expected_applied[k]) {
        std::cerr << "round " << round << ", group " << k << ": applied " << *applied[k] << ", memory "
                  << expected_applied[k] << "\n";
        return 1;
      }
      for (auto i : indexes[k]) {
        const bool previous_differs =
            ops[i].kind() == op_kind::sliding && got[i].previous != expected[i].previous;
        const bool leases_differ =
            ops[i].kind() == op_kind::concurrency &&
            (got[i].before != expected[i].before || got[i].expired != expected[i].expired ||
             got[i].oldest_end_us != expected[i].oldest_end_us || got[i].holders != expected[i].holders ||
             got[i].holder_slots != expected[i].holder_slots);
        if (got[i].value != expected[i].value || previous_differs || leases_differ) {
          std::cerr << where(i) << (plain ? " [plain]" : "") << (hot ? " [hot]" : "") << ": Redis "
                    << got[i].value << "/" << got[i].previous << ", memory " << expected[i].value << "/"
                    << expected[i].previous << "\n";
          return 1;
        }
        ++checked;
      }
    }

    // Each GCRA key's TTL (of its one limit), and whether this round gave it.
    std::map<std::string, std::int64_t, std::less<>> gcra_ttl;
    std::set<std::string, std::less<>> ttl_given, usage_keys;
    for (std::size_t k = 0; k < groups.size(); ++k) {
      for (auto i : indexes[k]) {
        if (ops[i].kind() != op_kind::gcra) continue;
        if (ops[i].usage) usage_keys.emplace(ops[i].key);
        gcra_ttl[std::string(ops[i].key)] = backends::redis::gcra_ttl_ms(ops[i]);
        const bool admitted_write =
            !ops[i].refund && expected_applied[k] && limiter::admits(ops[i], expected[i]);
        if (admitted_write || (plain && groups[k].mode == batch_mode::independent))
          ttl_given.emplace(ops[i].key);
      }
    }

    // What each store holds now (an arrival time already past means the same as none).
    for (const auto& key : keys) {
      // A concurrency key is a HASH: its op results above are what is compared (and its TTL here).
      if (key.find("_k") != std::string::npos) {
        if (command({"PTTL", key}).integer == -1) {
          std::cerr << "round " << round << ": concurrency key " << key << " has no TTL\n";
          return 1;
        }
        continue;
      }
      counter_op probe;
      probe.key = key;
      op_result held;
      recorder r;
      memory.get({&probe, 1}, {&held, 1}, r);
      const auto v = command({"GET", key});
      const bool gcra = key.find("_g") != std::string::npos;
      std::uint64_t in_redis = 0;
      if (v.type == redis::value::kind::bulk_string)
        in_redis = gcra ? backends::redis::gcra_time(v.text) : std::stoull(v.text);
      std::uint64_t in_memory = held.value;
      // The fake clock stands still while the round runs in real time: a GCRA key whose arrival time was less
      // than that real time ahead may have expired in Redis since it was written (its TTL runs to that time).
      const auto ahead = static_cast<std::int64_t>(in_memory) - now_us;
      if (gcra && v.type == redis::value::kind::null && ahead > 0 && ahead <= real_micros() - sent_real)
        in_memory = 0;
      const auto pttl = command({"PTTL", key}).integer;
      if (gcra && usage_keys.contains(key)) {
        // Usage may run the arrival time past the tolerance: the key must live until it has passed.
        if (pttl == -1 ||
            (pttl >= 0 && (pttl + 1000) * 1000 < static_cast<std::int64_t>(in_redis) - now_us)) {
          std::cerr << "round " << round << ": usage key " << key << " holds " << in_redis << " with PTTL "
                    << pttl << ": it would go before its arrival time\n";
          return 1;
        }
      } else if (const auto ttl_error = wrong_ttl(pttl, gcra, ttl_given.contains(key), gcra_ttl[key],
                                                  in_redis, (real_micros() - round_started) / 1000)) {
        std::cerr << "round " << round << ": key " << key << " " << *ttl_error << "\n";
        return 1;
      }
      if (gcra) {
        in_redis = std::max<std::uint64_t>(in_redis, static_cast<std::uint64_t>(now_us));
        in_memory = std::max<std::uint64_t>(in_memory, static_cast<std::uint64_t>(now_us));
      }
      if (in_redis != in_memory) {
        std::cerr << "round " << round << ": key " << key << " holds " << in_redis << " in Redis, "
                  << in_memory << " in memory\n";
        return 1;
      }
    }
  }
  std::cout << rounds << " rounds, " << checked << " op results agree\n";
  return 0;
}
