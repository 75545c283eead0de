// libFuzzer: arbitrary bytes as what a remote region's Redis answers a round (remote_reads.hpp), as a
// heartbeat field, and as a REDIS_REMOTE_AUTH_FILE. Checks what must hold for any input: the replies parsed
// from the bytes (as many as a round of three counters, a lease hash and a holder set expects) are read or
// refused, never out of bounds; read, every key has a total, and a refusal says why; a heartbeat that decodes
// encodes back to text that decodes alike; a secret file gives a region's secret or a reason (that it never
// quotes a secret is regions_test's).
//
// Build and run: scripts/fuzz remote_reads [seconds]

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/backends/redis/remote_reads.hpp"
#include "redis/credentials.hpp"
#include "redis/resp.hpp"

namespace {

namespace rr = sluice::ratelimit::backends::redis;
namespace rd = sluice::redis;

void check(bool ok) {
  if (!ok) std::abort();
}

void read_round(std::string_view data) {
  static const std::string a = "k_a", b = "k_b", c = "k_c", lease = "k_l", holders = "k_h";
  static const rr::tracked_key counter{};
  static const rr::tracked_key leases = [] {
    rr::tracked_key t;
    t.kind = rr::remote_kind::leases;
    t.timing = {1'000'000, 4};
    return t;
  }();
  static const rr::tracked_key per_holder = [] {
    rr::tracked_key t;
    t.kind = rr::remote_kind::holders;
    return t;
  }();
  const std::vector<rr::key_read> keys{
      {&a, &counter}, {&b, &counter}, {&c, &counter}, {&lease, &leases}, {&holders, &per_holder}};
  std::vector<rd::value> replies;
  std::size_t pos = 0;
  while (pos < data.size() && replies.size() < 8) {
    std::size_t used = 0;
    rd::value v;
    std::string error;
    if (rd::parse_reply(data.substr(pos), used, v, error) != rd::parse_status::complete) break;
    pos += used;
    replies.push_back(std::move(v));
  }
  rr::region_health health;
  std::vector<std::uint64_t> totals;
  std::string error;
  const std::int64_t now_us = 1'796'000'000'000'000;
  if (rr::read_remote_replies(replies, keys, now_us, now_us / 1000 - 2000, health, totals, error)) {
    check(totals.size() == keys.size());
    check(error.empty());
  } else {
    check(!error.empty());
  }
}

void heartbeat(std::string_view data) {
  std::int64_t ms = 0;
  std::map<std::string, bool> sees;
  if (!rr::decode_heartbeat(data, ms, sees)) return;
  std::int64_t again_ms = 0;
  std::map<std::string, bool> again;
  check(rr::decode_heartbeat(rr::encode_heartbeat(ms, sees), again_ms, again));
  check(again_ms == ms && again == sees);
}

void secret_file(std::string_view data) {
  rd::secret out;
  if (auto problem = rd::parse_named_secret(std::string(data), "us", out)) {
    check(!problem->empty());
  } else {
    check(!out.password.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::string_view data(reinterpret_cast<const char*>(bytes), size);
  read_round(data);
  heartbeat(data);
  secret_file(data);
  return 0;
}
