// concurrency on the memory store and on Redis, several workers (docs/guides/in-flight.md): clients acquire,
// hold from milliseconds to minutes (LLM calls), and release; some releases are lost, some acquisitions are
// sent twice, long holds renew, and with holder_key every refused request still sends its release (as behind
// Envoy). Checked at every decision: never more than the limit truly in flight (admitted and not yet ended),
// and without lost releases no refusal below it; with holder_key, each decision and limit_remaining exactly
// as the model's (a holder's lease ends exactly at acquisition or renewal + lease, a release frees its
// holder's slots alone, a resend counts once).
#include <map>
#include <queue>

#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace concurrency_sim {

enum class step : std::uint8_t { start, renew, end };

struct event {
  std::int64_t at;
  int client;
  step what;
  bool operator>(const event& o) const { return at > o.at; }
};

struct shape {
  std::uint32_t limit;
  std::int64_t lease_s;
  int clients;
  std::int64_t hold_min, hold_max, idle_max;
};

run_result run(const run_params& p, store_kind store) {
  random rng(p.seed);
  // On Redis, leases of a minute or more (agreement_backend.hpp).
  const shape sh = store == store_kind::redis
                       ? rng.pick(std::vector<shape>{{20, 600, 80, 5 * second, 30 * second, 2 * second},
                                                     {3, 60, 12, 20 * ms, 90 * second, 2 * second},
                                                     {50, 60, 120, 100 * ms, 5 * 60 * second, 10 * second}})
                       : rng.pick(std::vector<shape>{{20, 600, 80, 5 * second, 30 * second, 2 * second},
                                                     {3, 3, 12, 20 * ms, 20 * ms, 20 * ms},
                                                     {3, 3, 12, 20 * ms, 8 * second, 200 * ms},
                                                     {50, 60, 120, 100 * ms, 5 * 60 * second, 10 * second}});
  const bool holder = rng.chance(0.5);
  const double lost = rng.pick(std::vector<double>{0, 0.01, 0.05});
  const double resend = holder ? rng.pick(std::vector<double>{0, 0.05, 0.1}) : 0;
  const std::string limit = "{requests_per_unit: " + std::to_string(sh.limit) +
                            ", algorithm: concurrency, lease: " + std::to_string(sh.lease_s) + "s";
  // With holder_key the descriptor is [tenant, request_id]; without, [tenant] (an id in it would make a
  // counter per request).
  const std::string yaml =
      holder ? "domain: ai\ndescriptors:\n  - key: tenant\n    descriptors:\n      - key: request_id\n"
               "        rate_limit: " +
                   limit + ", holder_key: request_id}\n"
             : "domain: ai\ndescriptors:\n  - key: tenant\n    rate_limit: " + limit + "}\n";
  checker check;
  world w(yaml, static_cast<int>(rng.between(2, 4)), check, store, p.variant);
  run_result out;
  auto decide = [&](const std::string& id, bool release) {
    const auto request = holder ? make_request("ai", {{"tenant", "acme"}, {"request_id", id}}, 0, release)
                                : make_request("ai", {{"tenant", "acme"}}, 0, release);
    ++out.decisions;
    return w.decide_anywhere(rng, request).statuses(0);
  };

  const std::int64_t lease = sh.lease_s * second;
  // Without an identity a hold cannot renew: it stays within the lease (a longer one frees its slot early).
  const std::int64_t hold_max = holder ? sh.hold_max : std::min(sh.hold_max, lease - ms);
  const std::int64_t end = end_of(p);
  std::priority_queue<event, std::vector<event>, std::greater<>> queue;
  for (int c = 0; c < sh.clients; ++c) queue.push({start_us + rng.between(0, sh.idle_max), c, step::start});
  std::vector<std::string> holding(static_cast<std::size_t>(sh.clients));  // the id a client holds, or ""
  std::vector<std::int64_t> ends_at(static_cast<std::size_t>(sh.clients), 0);
  std::map<std::string, std::int64_t> model;  // holder_key: the leases the store must hold → their end
  std::uint64_t in_flight = 0, serial = 0;
  auto model_count = [&](std::int64_t now) {
    std::erase_if(model, [&](const auto& kv) { return kv.second <= now; });
    return model.size();
  };
  // A hold longer than half a lease renews every half lease (holder_key: a repeated acquisition keeps a long
  // call's slot alive); without an identity, holds stay below the lease.
  auto next_step = [&](int client, std::int64_t now) {
    const std::int64_t ends = ends_at[static_cast<std::size_t>(client)];
    if (holder && now + lease / 2 < ends) {
      queue.push({now + lease / 2, client, step::renew});
    } else {
      queue.push({ends, client, step::end});
    }
  };
  std::int64_t now = start_us;
  while (!queue.empty() && !check.failed()) {
    const event e = queue.top();
    queue.pop();
    if (e.at > end) break;
    now = e.at;
    w.clock.set_micros(now);
    auto& id = holding[static_cast<std::size_t>(e.client)];
    if (e.what == step::renew) {
      const auto st = decide(id, false);
      check.expect(st.code() == rls_response::OK, now - start_us, "a renewal of ", id, " was refused");
      model[id] = now + lease;
      next_step(e.client, now);
      continue;
    }
    if (e.what == step::end) {
      --in_flight;
      if (!rng.chance(lost)) {
        decide(id, true);
        model.erase(id);
      }
      id.clear();
      queue.push({now + rng.between(0, sh.idle_max), e.client, step::start});
      continue;
    }
    id = "c" + std::to_string(e.client) + "-" + std::to_string(++serial);
    const bool expected = model_count(now) + 1 <= sh.limit;
    const auto st = decide(id, false);
    const bool admitted = st.code() == rls_response::OK;
    // Without an identity and with no release lost, the store holds no more slots than are truly in flight
    // (holds stay within the lease): a refusal means the limit is truly reached.
    if (!holder && lost == 0)
      check.expect(admitted || in_flight + 1 > sh.limit, now - start_us, id, " refused with ", in_flight,
                   " truly in flight of ", sh.limit);
    if (holder)
      check.expect(admitted == expected, now - start_us, id, ": the model ", expected ? "admits" : "refuses",
                   " with ", model.size(), " leases held of ", sh.limit, ", the store ",
                   admitted ? "admitted" : "refused");
    if (!admitted) {
      // Envoy sends the stream-done release of a refused request too (ratelimit.cc, onDestroy).
      if (holder) decide(id, true);
      id.clear();
      queue.push({now + rng.between(100 * ms, sh.idle_max + 100 * ms), e.client, step::start});
      continue;
    }
    ++in_flight;
    check.expect(in_flight <= sh.limit, now - start_us, in_flight, " in flight, over the limit of ",
                 sh.limit);
    if (holder) {
      model[id] = now + lease;
      check.expect(st.limit_remaining() == sh.limit - model_count(now), now - start_us, "limit_remaining ",
                   st.limit_remaining(), " where the model has ", sh.limit - model.size());
      if (rng.chance(resend)) {
        const auto again = decide(id, false);
        check.expect(again.code() == rls_response::OK && again.limit_remaining() == st.limit_remaining(),
                     now - start_us, "a resend of ", id, " counted again");
      }
    }
    ends_at[static_cast<std::size_t>(e.client)] =
        now + rng.between(std::min(sh.hold_min, hold_max), hold_max);
    next_step(e.client, now);
  }
  return check.finish(out, now);
}

}  // namespace concurrency_sim

leg concurrency_leg() {
  return {"concurrency memory",
          0.2,
          [](const run_params& p) { return concurrency_sim::run(p, store_kind::memory); },
          {"holder lease one second short", "newest-first release"}};
}

leg concurrency_redis_leg() {
  return {"concurrency redis",
          0.1,
          [](const run_params& p) { return concurrency_sim::run(p, store_kind::redis); },
          {},
          20};
}

}  // namespace sluice::sim
