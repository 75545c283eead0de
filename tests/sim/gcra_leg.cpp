// gcra on the memory store and on Redis, several workers: tenants of one rule (a rate per second to per
// hour, a burst of 1 to the rate; on Redis, buckets of half a minute or more: agreement_backend.hpp). With T
// the rule's own interval (the unit over requests_per_unit, rounded up to a microsecond) and the model's
// arrival time per tenant (a request of n hits admits when max(TAT, now) + n·T − burst·T ≤ now):
// - accounting: admission (three seeds in five): steady, bursty and saturating arrivals of 1-3 hits. Checked
//   at every decision: the model's verdict; the bound (in any interval [a, b], the hits admitted are at most
//   burst + (b − a) / T); liveness (a request of no more than `burst` hits is admitted once burst × T has
//   passed since the last admitted one).
// - accounting: usage: reports of 1-3 hits and now and then 5-40 (debt: the arrival time runs past now +
//   burst·T), refunds (the arrival time moved back, never before now) and checks of 0 hits (judged as one).
//   Checked at every decision: the model's verdict, which holds the rule for debt in
//   docs/guides/llm-tokens.md#reported-usage-always-counts-accounting-usage (the next hit fits once now ≥
//   arrival time + T − burst·T).
#include <map>

#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace gcra_sim {

// The admission form's bound and liveness, per tenant, for a bucket of `burst` and T = `interval_us`.
struct bucket {
  double prefix = 0;            // hits admitted so far
  double least = 0;             // the least of (hits admitted before an admission − its time / T) so far
  bool any = false;             // an admission was seen
  std::int64_t last_admit = 0;  // when

  // Checks the store's answer to `hits` at `now`: no refusal on an empty bucket (`empty_after` past the last
  // admission), and the hits admitted since the admission that set `least` within what the bucket lets
  // through.
  void judge(checker& check, std::int64_t now, int tenant, std::uint32_t hits, bool admitted,
             std::uint32_t burst, double interval_us, std::int64_t empty_after) {
    const bool empty = !any || now - last_admit >= empty_after;
    check.expect(admitted || !empty || hits > burst, now - start_us, "tenant t", tenant, ": ", hits,
                 " hits refused on an empty bucket of ", burst);
    if (!admitted) return;
    const double t = static_cast<double>(now - start_us) / interval_us;
    least = any ? std::min(least, prefix - t) : prefix - t;
    any = true;
    prefix += hits;
    last_admit = now;
    check.expect(prefix - t - least <= burst + 1e-6, now - start_us, "tenant t", tenant, ": ",
                 prefix - t - least, " hits admitted over an interval that allows ", burst,
                 " + its length / T");
  }
};

// The model's arrival time for a tenant: what a request of `hits` (a check: 0) at `now` would leave, and
// whether it admits.
struct model_bucket {
  std::int64_t tat = 0;
  bool admits(std::int64_t now, std::uint64_t hits, std::int64_t t_us, std::int64_t tolerance_us) const {
    return std::max(tat, now) + static_cast<std::int64_t>(std::max<std::uint64_t>(hits, 1)) * t_us -
               tolerance_us <=
           now;
  }
};

run_result run_usage(const run_params& p, store_kind store, random& rng, const rule_shape& sh,
                     std::uint32_t burst, const arrivals& traffic);

run_result run(const run_params& p, store_kind store) {
  random rng(p.seed);
  const bool redis = store == store_kind::redis;
  const rule_shape sh =
      redis
          ? rng.pick(std::vector<rule_shape>{{60, "minute", 60, 200 * ms}, {100, "hour", 3600, 30 * second}})
          : rng.pick(std::vector<rule_shape>{{10, "second", 1, 100 * ms},
                                             {60, "minute", 60, 2 * second},
                                             {600, "minute", 60, 50 * ms},
                                             {100, "hour", 3600, 30 * second}});
  const auto burst = static_cast<std::uint32_t>(
      redis && sh.unit_s == 60 ? sh.requests : rng.pick(std::vector<std::int64_t>{1, 3, sh.requests}));
  const arrivals traffic = draw_arrivals(rng, sh);
  if (rng.chance(0.4)) return run_usage(p, store, rng, sh, burst, traffic);
  checker check;
  world w(tenant_rules(sh, ", algorithm: gcra, burst: " + std::to_string(burst)),
          static_cast<int>(rng.between(2, 4)), check, store, p.variant);
  const double interval_us = static_cast<double>(sh.unit_s * second) / sh.requests;  // T
  // The code rounds T up to a whole microsecond: the bucket is empty burst × that after the last admission.
  const auto empty_after =
      static_cast<std::int64_t>(burst) * ((sh.unit_s * second + sh.requests - 1) / sh.requests);

  const std::int64_t t_us = (sh.unit_s * second + sh.requests - 1) / sh.requests;
  std::map<int, model_bucket> model;
  run_result out;
  std::map<int, bucket> buckets;
  const std::int64_t end = end_of(p);
  const auto now = run_arrivals(
      w, rng, check, traffic, end, out,
      [&](std::int64_t now, int tenant, std::uint32_t hits, const auto& st) {
        auto& m = model[tenant];
        const bool admits = m.admits(now, hits, t_us, burst * t_us);
        if (admits) m.tat = std::max(m.tat, now) + hits * t_us;
        const bool admitted = st.code() == rls_response::OK;
        check.expect(admitted == admits, now - start_us, "tenant t", tenant, ": ", hits, " hits, the model ",
                     admits ? "admits" : "refuses", ", the store ", admitted ? "admitted" : "refused");
        buckets[tenant].judge(check, now, tenant, hits, admitted, burst, interval_us, empty_after);
      });
  return check.finish(out, now);
}

run_result run_usage(const run_params& p, store_kind store, random& rng, const rule_shape& sh,
                     std::uint32_t burst, const arrivals& traffic) {
  const double refunds = rng.pick(std::vector<double>{0, 0.05, 0.15});
  const double checks = rng.pick(std::vector<double>{0.05, 0.2});
  const double big = rng.pick(std::vector<double>{0, 0.02, 0.1});
  checker check;
  world w(tenant_rules(sh, ", algorithm: gcra, accounting: usage, burst: " + std::to_string(burst)),
          static_cast<int>(rng.between(2, 4)), check, store, p.variant);
  const std::int64_t t_us = (sh.unit_s * second + sh.requests - 1) / sh.requests;
  const std::int64_t tolerance_us = burst * t_us;
  std::map<int, model_bucket> model;
  run_result out;
  const std::int64_t end = end_of(p);
  std::int64_t now = start_us;
  while (now < end && !check.failed()) {
    now += rng.between(0, 2 * traffic.mean_gap_us / traffic.clients);
    w.clock.set_micros(now);
    const int tenant = static_cast<int>(rng.between(0, traffic.tenants - 1));
    const bool refund = rng.chance(refunds);
    const bool is_check = !refund && rng.chance(checks);
    const auto hits = static_cast<std::uint32_t>(is_check          ? 0
                                                 : rng.chance(big) ? rng.between(5, 40)
                                                                   : rng.between(1, 3));
    const auto st = w.decide_anywhere(rng, tenant_report(tenant, hits, refund)).statuses(0);
    ++out.decisions;
    auto& m = model[tenant];
    const std::int64_t tat = std::max(m.tat, now);
    if (refund) {
      m.tat = std::max(tat - static_cast<std::int64_t>(hits) * t_us, now);
      continue;
    }
    const bool admits = m.admits(now, hits, t_us, tolerance_us);
    m.tat = tat + static_cast<std::int64_t>(hits) * t_us;  // usage: spent, whatever the verdict
    check.expect(st.code() == (admits ? rls_response::OK : rls_response::OVER_LIMIT), now - start_us,
                 "tenant t", tenant, ": ", hits, " hits", is_check ? " (a check)" : "",
                 " with the arrival time ", tat - now, " us ahead (burst × T = ", tolerance_us,
                 " us): the model ", admits ? "admits" : "refuses");
  }
  return check.finish(out, now);
}

}  // namespace gcra_sim

leg gcra_leg() {
  return {"gcra memory",
          0.2,
          [](const run_params& p) { return gcra_sim::run(p, store_kind::memory); },
          {"gcra bucket one deeper"}};
}

leg gcra_redis_leg() {
  return {"gcra redis", 0.1, [](const run_params& p) { return gcra_sim::run(p, store_kind::redis); }, {}, 20};
}

}  // namespace sluice::sim
