// sliding_window on the memory store and on Redis, several workers: tenants of one rule (10 a second to 50 an
// hour), with `accounting: admission` or `usage`. Besides requests of 1-3 hits: negative hits (refunds),
// checks of 0 hits (usage), and reports that are repeated (sent twice), lost (never sent) or late (sent up to
// a window and a half after they were made, so often into a later window). The model is the rule in
// docs/concepts/algorithms.md in integers: a request of h hits at `now` is admitted when
// ceil(previous × (W − elapsed) / W) + current + h (+1 for a check under usage) ≤ L; admission counts what it
// admits, usage every hit reported; a refund takes from the current window, never below 0. Checked at every
// decision: the code and limit_remaining the model gives; and with admission and no refunds, the bound in
// docs/concepts/algorithms.md: in any interval [a, b] of length d ≤ W, at most L × (1 + d/W) hits admitted.
#include <deque>
#include <map>
#include <queue>

#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace sliding_window_sim {

struct report {
  std::int64_t at;
  int tenant;
  std::uint32_t hits;
  bool operator>(const report& o) const { return at > o.at; }
};

// The rule of docs/concepts/algorithms.md in integers, per tenant, and its bound.
class sliding_model {
 public:
  sliding_model(std::uint64_t limit, std::int64_t window_us, bool usage, bool bounded, int tenants)
      : L_(limit),
        W_(window_us),
        usage_(usage),
        bounded_(bounded),
        tenants_(static_cast<std::size_t>(tenants)) {}

  // Checks the store's answer `st` to `hits` (a refund, or a check of 0) at `now`, and counts them.
  void judge(checker& check, std::int64_t now, int tenant, std::uint32_t hits, bool refund, bool is_check,
             const rls_response::DescriptorStatus& st) {
    auto& m = tenants_[static_cast<std::size_t>(tenant)];
    const std::int64_t start = now - now % W_;
    std::erase_if(m.counts, [&](const auto& kv) { return kv.first < start - W_; });
    auto& current = m.counts[start];
    if (refund) {
      current -= std::min<std::uint64_t>(current, hits);
      return;
    }
    const auto found = m.counts.find(start - W_);
    const std::uint64_t previous = found == m.counts.end() ? 0 : found->second;
    const auto weighted = static_cast<std::uint64_t>(
        (previous * static_cast<std::uint64_t>(W_ - (now - start)) + W_ - 1) / W_);  // ceil, in integers
    const std::uint64_t judged = usage_ && is_check ? 1 : 0;
    const bool admits = weighted + current + hits + judged <= L_;
    if (admits || usage_) current += hits;
    const std::uint64_t remaining = admits ? L_ - std::min(L_, current + weighted) : 0;
    check.expect(st.code() == (admits ? rls_response::OK : rls_response::OVER_LIMIT), now - start_us,
                 "tenant t", tenant, ": ", hits, " hits", is_check ? " (a check)" : "", " on ", current,
                 " in this window and ", previous, " in the last (", weighted, " weighted) of ", L_,
                 ": the model ", admits ? "admits" : "refuses");
    check.expect(st.limit_remaining() == remaining, now - start_us, "tenant t", tenant, ": limit_remaining ",
                 st.limit_remaining(), " where the model has ", remaining);
    if (bounded_ && admits) check_bound(check, now, tenant, hits);
  }

 private:
  struct tenant {
    std::map<std::int64_t, std::uint64_t> counts;                 // window start (µs) → count
    std::deque<std::pair<std::int64_t, std::uint64_t>> admitted;  // (when, hits) within the last window
  };

  // The bound of docs/concepts/algorithms.md over every interval that ends now and starts at an admission
  // within the last W.
  void check_bound(checker& check, std::int64_t now, int t, std::uint32_t hits) {
    auto& m = tenants_[static_cast<std::size_t>(t)];
    while (!m.admitted.empty() && m.admitted.front().first <= now - W_) m.admitted.pop_front();
    m.admitted.emplace_back(now, hits);
    std::uint64_t total = 0;
    for (const auto& a : m.admitted) total += a.second;
    for (const auto& [when, h] : m.admitted) {
      const double allowed = static_cast<double>(L_) * (1 + static_cast<double>(now - when) / W_);
      check.expect(static_cast<double>(total) <= allowed + 1e-9, now - start_us, "tenant t", t, ": ", total,
                   " hits admitted over ", (now - when) / ms, " ms, more than L × (1 + d/W) = ", allowed);
      total -= h;
    }
  }

  std::uint64_t L_;
  std::int64_t W_;
  bool usage_, bounded_;
  std::vector<tenant> tenants_;
};

run_result run(const run_params& p, store_kind store) {
  random rng(p.seed);
  const rule_shape sh = rng.pick(std::vector<rule_shape>{{10, "second", 1, 150 * ms},
                                                         {60, "minute", 60, 1500 * ms},
                                                         {100, "minute", 60, 300 * ms},
                                                         {50, "hour", 3600, 60 * second}});
  const bool usage = rng.chance(0.5);
  const double refunds = rng.pick(std::vector<double>{0, 0.05, 0.15});
  const double checks = usage ? rng.pick(std::vector<double>{0, 0.1}) : 0;
  const double repeated = rng.pick(std::vector<double>{0, 0.03});
  const double lost = rng.pick(std::vector<double>{0, 0.03});
  const double late = rng.pick(std::vector<double>{0, 0.05});
  const arrivals traffic = draw_arrivals(rng, sh);
  checker check;
  world w(tenant_rules(sh, std::string(", algorithm: sliding_window") + (usage ? ", accounting: usage" : "")),
          static_cast<int>(rng.between(2, 4)), check, store, p.variant);
  const std::int64_t W = sh.unit_s * second;
  sliding_model model(sh.requests, W, usage, !usage && refunds == 0, traffic.tenants);

  run_result out;
  auto send = [&](std::int64_t now, int tenant, std::uint32_t hits, bool refund, bool is_check) {
    const auto st = w.decide_anywhere(rng, tenant_report(tenant, is_check ? 0 : hits, refund)).statuses(0);
    ++out.decisions;
    model.judge(check, now, tenant, hits, refund, is_check, st);
  };

  std::priority_queue<report, std::vector<report>, std::greater<>> late_reports;
  const std::int64_t end = end_of(p);
  std::int64_t now = start_us;
  while (now < end && !check.failed()) {
    now += rng.between(0, 2 * traffic.mean_gap_us / traffic.clients);
    w.clock.set_micros(now);
    while (!late_reports.empty() && late_reports.top().at <= now && !check.failed()) {
      const auto r = late_reports.top();
      late_reports.pop();
      send(now, r.tenant, r.hits, false, false);
    }
    const int burst = traffic.bursty && rng.chance(0.05) ? static_cast<int>(rng.between(2, 20)) : 1;
    for (int i = 0; i < burst && !check.failed(); ++i) {
      const int tenant = static_cast<int>(rng.between(0, traffic.tenants - 1));
      const auto hits = static_cast<std::uint32_t>(rng.chance(0.2) ? rng.between(2, 3) : 1);
      if (rng.chance(refunds)) {
        send(now, tenant, hits, true, false);
      } else if (rng.chance(checks)) {
        send(now, tenant, 0, false, true);
      } else if (rng.chance(late)) {
        late_reports.push({now + rng.between(1, 3 * W / 2), tenant, hits});
      } else if (!rng.chance(lost)) {
        send(now, tenant, hits, false, false);
        if (rng.chance(repeated)) send(now, tenant, hits, false, false);
      }
    }
  }
  return check.finish(out, now);
}

}  // namespace sliding_window_sim

leg sliding_window_leg() {
  return {"sliding_window memory",
          0.3,
          [](const run_params& p) { return sliding_window_sim::run(p, store_kind::memory); },
          {"window off by one second"}};
}

leg sliding_window_redis_leg() {
  return {"sliding_window redis",
          0.1,
          [](const run_params& p) { return sliding_window_sim::run(p, store_kind::redis); },
          {},
          20};
}

}  // namespace sluice::sim
