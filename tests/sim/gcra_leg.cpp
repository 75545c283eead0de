// gcra on the memory store and on Redis, several workers: tenants of one rule (a rate per second to per
// hour, a burst of 1 to the rate; on Redis, buckets of half a minute or more: agreement_backend.hpp), steady,
// bursty and saturating arrivals of 1-3 hits. Checked at every decision, with T the rule's own interval (the
// unit over requests_per_unit):
// - the bound: in any interval [a, b], the hits admitted are at most burst + (b − a) / T;
// - liveness: a request of no more than `burst` hits is admitted once burst × T has passed since the last
//   admitted one (the bucket is empty by then).
#include <map>

#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace gcra_sim {

struct bucket {
  double prefix = 0;            // hits admitted so far
  double least = 0;             // the least of (hits admitted before an admission − its time / T) so far
  bool any = false;             // an admission was seen
  std::int64_t last_admit = 0;  // when
};

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
  checker check;
  world w(tenant_rules(sh, ", algorithm: gcra, burst: " + std::to_string(burst)),
          static_cast<int>(rng.between(2, 4)), check, store, p.variant);
  const double interval_us = static_cast<double>(sh.unit_s * second) / sh.requests;  // T
  // The code rounds T up to a whole microsecond: the bucket is empty burst × that after the last admission.
  const auto empty_after =
      static_cast<std::int64_t>(burst) * ((sh.unit_s * second + sh.requests - 1) / sh.requests);

  run_result out;
  std::map<int, bucket> buckets;
  const std::int64_t end = start_us + static_cast<std::int64_t>(p.hours * static_cast<double>(hour));
  const auto now =
      run_arrivals(w, rng, check, traffic, end, out,
                   [&](std::int64_t now, int tenant, std::uint32_t hits, const auto& st) {
                     auto& b = buckets[tenant];
                     const bool admitted = st.code() == rls_response::OK;
                     const bool empty = !b.any || now - b.last_admit >= empty_after;
                     check.expect(admitted || !empty || hits > burst, now - start_us, "tenant t", tenant,
                                  ": ", hits, " hits refused on an empty bucket of ", burst);
                     if (!admitted) return;
                     const double t = static_cast<double>(now - start_us) / interval_us;
                     b.least = b.any ? std::min(b.least, b.prefix - t) : b.prefix - t;
                     b.any = true;
                     b.prefix += hits;
                     b.last_admit = now;
                     // The hits admitted since the admission that set `least`, against what the bucket may
                     // let through.
                     check.expect(b.prefix - t - b.least <= burst + 1e-6, now - start_us, "tenant t", tenant,
                                  ": ", b.prefix - t - b.least,
                                  " hits admitted over an interval that allows ", burst, " + its length / T");
                   });
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
