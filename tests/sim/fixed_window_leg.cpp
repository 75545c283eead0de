// fixed_window on the memory store and on Redis, several workers: tenants of one rule with a limit per window
// of a second to an hour, steady, bursty and saturating arrivals of 1-3 hits, and in half the seeds reloads
// that change the limit (to half, the same or twice the rule's), in a quarter count_only_admitted (a refused
// request counts nothing); in another quarter accounting: usage, with refunds and checks of 0 hits, where
// every window, as it ends, must hold in the store exactly the hits reported in it less those given back.
// The model is upstream's
// counting: every hit counts, and a request is admitted when its window's count with its hits stays within
// the limit. Checked at every decision: the code and limit_remaining the model gives; per window, the hits
// admitted never exceed the limit.
#include <map>

#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace fixed_window_sim {

// accounting: usage: reports of 1-3 hits, now and then 5-40, refunds, and checks of 0 hits (judged as one).
run_result run_usage(const run_params& p, store_kind store, random& rng, const rule_shape& sh,
                     const arrivals& traffic) {
  checker check;
  world w(tenant_rules(sh, ", accounting: usage"), static_cast<int>(rng.between(2, 4)), check, store,
          p.variant);
  run_result out;
  std::map<std::pair<int, std::int64_t>, std::uint64_t> counted;  // (tenant, window start) → hits
  const std::int64_t end = end_of(p);
  std::int64_t now = start_us, window = 0;
  // Every window that is ending holds in the store what was reported in it, less what was given back.
  auto settle = [&](std::int64_t before) {
    for (auto it = counted.begin(); it != counted.end();) {
      if (it->first.second >= before) {
        ++it;
        continue;
      }
      const std::string key =
          "sim_tenant_t" + std::to_string(it->first.first) + "_" + std::to_string(it->first.second);
      const auto held = w.read_counter(key);
      check.expect(held == it->second, now - start_us, key, " holds ", held, " where ", it->second,
                   " were reported (less refunds)");
      it = counted.erase(it);
    }
  };
  while (now < end && !check.failed()) {
    const std::int64_t next = now + rng.between(0, 2 * traffic.mean_gap_us / traffic.clients);
    const std::int64_t start = next / second / sh.unit_s * sh.unit_s;
    // Read while the clock is still in the window (the counter goes with it: its TTL is the window's).
    if (start != window) settle(start);
    window = start;
    now = next;
    w.clock.set_micros(now);
    const int tenant = static_cast<int>(rng.between(0, traffic.tenants - 1));
    const bool refund = rng.chance(0.05);
    const bool is_check = !refund && rng.chance(0.1);
    const auto hits = static_cast<std::uint32_t>(is_check           ? 0
                                                 : rng.chance(0.05) ? rng.between(5, 40)
                                                                    : rng.between(1, 3));
    const auto st = w.decide_anywhere(rng, tenant_report(tenant, hits, refund)).statuses(0);
    ++out.decisions;
    auto& count = counted[{tenant, start}];
    if (refund) {
      count -= std::min<std::uint64_t>(count, hits);
      continue;
    }
    count += hits;
    const bool ok = count + (is_check ? 1 : 0) <= sh.requests;
    check.expect(st.code() == (ok ? rls_response::OK : rls_response::OVER_LIMIT), now - start_us, "tenant t",
                 tenant, ": ", hits, " hits", is_check ? " (a check)" : "", " with the window at ", count,
                 " of ", sh.requests, ": the store said ",
                 st.code() == rls_response::OK ? "OK" : "over the limit");
  }
  settle(now / second / sh.unit_s * sh.unit_s + sh.unit_s);
  return check.finish(out, now);
}

run_result run(const run_params& p, store_kind store) {
  random rng(p.seed);
  const rule_shape sh = rng.pick(std::vector<rule_shape>{{10, "second", 1, 400 * ms},
                                                         {60, "minute", 60, 2 * second},
                                                         {500, "minute", 60, 300 * ms},
                                                         {1000, "hour", 3600, 20 * second}});
  const arrivals traffic = draw_arrivals(rng, sh);
  if (rng.chance(0.25)) return run_usage(p, store, rng, sh, traffic);
  // Reloads that change the limit (to half, the same or twice the rule's): counters stay, so a window goes on
  // from its count under the new limit.
  const double reloads_per_hour = rng.pick(std::vector<double>{0, 0, 6, 120});
  const double reload_chance = reloads_per_hour * static_cast<double>(traffic.mean_gap_us / traffic.clients) /
                               static_cast<double>(hour);
  std::uint64_t limit = sh.requests;
  // count_only_admitted (a seed in four): all or nothing, a refused request counts nothing (on Redis, the
  // decide script's mode "a").
  const std::string descriptor = rng.chance(0.25) ? "count_only_admitted: true" : "";
  checker check;
  world w(tenant_rules(sh, "", descriptor), static_cast<int>(rng.between(2, 4)), check, store, p.variant);

  run_result out;
  window_counts counted(sh.unit_s), admitted(sh.unit_s);
  const auto now = run_arrivals(
      w, rng, check, traffic, end_of(p), out,
      [&](std::int64_t now, int tenant, std::uint32_t hits, const auto& st) {
        const std::int64_t window = counted.move_to(now);
        admitted.move_to(now);
        auto& count = counted.at(tenant, window);
        const bool ok = count + hits <= limit;
        if (ok || descriptor.empty()) count += hits;
        check.expect(st.code() == (ok ? rls_response::OK : rls_response::OVER_LIMIT), now - start_us,
                     "tenant t", tenant, ": the window's count is ", count, " of ", limit,
                     ", the store said ", ok ? "over the limit" : "OK");
        check.expect(st.limit_remaining() == (ok ? limit - count : 0), now - start_us, "limit_remaining ",
                     st.limit_remaining(), " where the model has ", ok ? limit - count : 0);
        if (st.code() == rls_response::OK) {
          auto& in = admitted.at(tenant, window);
          in += hits;
          check.expect(in <= limit, now - start_us, "tenant t", tenant, ": ", in,
                       " hits admitted in one window of ", limit);
        }
        if (rng.chance(reload_chance)) {
          limit = static_cast<std::uint64_t>(
              rng.pick(std::vector<std::int64_t>{sh.requests / 2, sh.requests, 2 * sh.requests}));
          w.reload(tenant_rules({static_cast<std::uint32_t>(limit), sh.unit, sh.unit_s, sh.mean_gap_us}, "",
                                descriptor));
        }
      });
  return check.finish(out, now);
}

}  // namespace fixed_window_sim

leg fixed_window_leg() {
  return {"fixed_window memory",
          0.5,
          [](const run_params& p) { return fixed_window_sim::run(p, store_kind::memory); },
          {"window off by one second"}};
}

leg fixed_window_redis_leg() {
  return {"fixed_window redis",
          0.1,
          [](const run_params& p) { return fixed_window_sim::run(p, store_kind::redis); },
          {"window off by one second"},
          20};
}

}  // namespace sluice::sim
