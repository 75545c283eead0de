// Per-tenant limits from a file table (limits_from, LIMIT_TABLES_DIR) on the memory store, several workers:
// ten tenants under one fixed-window rule, some listed in plans.csv with their own limit (0, a few, many, or
// unlimited); now and then the file is replaced (as a ConfigMap swap: a new file renamed over the old) with
// rows changed, added and removed, and read again as the watch would. Rows keep the rule's unit: a row's unit
// makes another window of the same key, upstream's counter, whose expiry then follows the last op's window
// (upstream's quirk, not the table's). The model: a tenant's limit is its row's in the table in force, else
// the rule's; every hit counts (upstream), but for an unlimited tenant's, which go nowhere; a limit of 0
// refuses every request. Checked at every decision: the code and limit_remaining the model gives.
#include <map>
#include <optional>

#include "../support/temp_dir.hpp"
#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace limit_table_sim {

struct row {
  std::uint32_t limit = 0;
  bool unlimited = false;
};

// plans.csv with `rows`, swapped in whole (as a ConfigMap is).
void write_table(const testing::temp_dir& dir, const std::map<int, row>& rows) {
  std::string csv = "value,requests_per_unit\n";
  for (const auto& [tenant, r] : rows)
    csv += "t" + std::to_string(tenant) + "," +
           (r.unlimited ? std::string("unlimited") : std::to_string(r.limit)) + "\n";
  dir.write("plans.csv", csv);
}

std::map<int, row> draw_rows(random& rng, int tenants) {
  std::map<int, row> rows;
  for (int t = 0; t < tenants; ++t) {
    if (rng.chance(0.4)) continue;  // not listed: the rule's limit
    const auto choice = rng.between(0, 9);
    rows[t] = choice == 0 ? row{0, true}
              : choice == 1
                  ? row{0, false}
                  : row{static_cast<std::uint32_t>(rng.pick(std::vector<std::int64_t>{3, 20, 200})), false};
  }
  return rows;
}

run_result run(const run_params& p) {
  random rng(p.seed);
  const rule_shape sh =
      rng.pick(std::vector<rule_shape>{{10, "second", 1, 100 * ms}, {60, "minute", 60, 500 * ms}});
  const arrivals traffic{sh.mean_gap_us, static_cast<int>(rng.between(4, 12)), 10, rng.chance(0.3)};
  const double changes_per_hour = rng.pick(std::vector<double>{6, 60, 600});
  const double change_chance = changes_per_hour * static_cast<double>(traffic.mean_gap_us / traffic.clients) /
                               static_cast<double>(hour);
  const testing::temp_dir folder("sluice-sim-tables");
  auto rows = draw_rows(rng, traffic.tenants);
  write_table(folder, rows);
  checker check;
  world w("domain: sim\ndescriptors:\n  - key: tenant\n    limits_from: plans\n    rate_limit: {unit: " +
              std::string(sh.unit) + ", requests_per_unit: " + std::to_string(sh.requests) + "}\n",
          static_cast<int>(rng.between(2, 4)), check, store_kind::memory, p.variant, folder.path.string());

  run_result out;
  window_counts counted(sh.unit_s);
  std::uint64_t changes = 0;
  const auto now = run_arrivals(
      w, rng, check, traffic, end_of(p), out,
      [&](std::int64_t now, int tenant, std::uint32_t hits, const auto& st) {
        const std::int64_t window = counted.move_to(now);
        const auto listed = rows.find(tenant);
        const row r = listed != rows.end() ? listed->second : row{sh.requests, false};
        if (r.unlimited) {
          check.expect(st.code() == rls_response::OK, now - start_us, "tenant t", tenant,
                       " is unlimited in the table, the store refused it");
        } else {
          auto& count = counted.at(tenant, window);
          count += hits;
          const bool ok = count <= r.limit;
          check.expect(st.code() == (ok ? rls_response::OK : rls_response::OVER_LIMIT) &&
                           st.limit_remaining() == (ok ? r.limit - count : 0),
                       now - start_us, "tenant t", tenant, " (",
                       listed != rows.end() ? "its row" : "the rule", ", after ", changes,
                       " table changes): the window's count is ", count, " of ", r.limit, "; the store said ",
                       st.code() == rls_response::OK ? "OK" : "over the limit", " with ",
                       st.limit_remaining(), " left");
        }
        if (rng.chance(change_chance)) {
          rows = draw_rows(rng, traffic.tenants);
          write_table(folder, rows);
          w.reload_tables();
          ++changes;
        }
      });
  return check.finish(out, now);
}

}  // namespace limit_table_sim

leg limit_table_leg() {
  return {"limit_table memory", 0.1, limit_table_sim::run, {"table reload that keeps the old rows"}};
}

}  // namespace sluice::sim
