// Restarts from MEMORY_SNAPSHOT_FILE, on the memory store, several workers: tenants of one fixed window (a
// second to an hour). Every MEMORY_SNAPSHOT_INTERVAL of virtual time (5 s to 5 min) the counters are written,
// as the module's timer writes them; now and then the process restarts: after SIGTERM (one more write, then
// the new process reads it back) or after a crash (kill -9: the new one reads the last periodic write, or
// starts empty when there is none). The model keeps its counts as of each write.
// docs/concepts/backends.md#counters-that-survive-a-restart-memory_snapshot_file: after SIGTERM the counts
// continue exactly; after a crash at most the hits since the last write are lost. So the model goes on from
// its own counts after a graceful restart, and from those of the last write after a crash; checked at every
// decision: the code and limit_remaining it gives. Nothing is admitted twice across a restart but the hits a
// crash lost.
#include <filesystem>

#include "../support/temp_dir.hpp"
#include "sim.hpp"
#include "world.hpp"

namespace sluice::sim {

namespace snapshot_sim {

run_result run(const run_params& p) {
  random rng(p.seed);
  const rule_shape sh = rng.pick(std::vector<rule_shape>{
      {10, "second", 1, 400 * ms}, {60, "minute", 60, 2 * second}, {1000, "hour", 3600, 20 * second}});
  const arrivals traffic = draw_arrivals(rng, sh);
  const std::int64_t interval = rng.pick(std::vector<std::int64_t>{5 * second, 30 * second, 300 * second});
  const double restarts_per_hour = rng.pick(std::vector<double>{2, 10, 60});
  const double crashes = rng.pick(std::vector<double>{0, 0.5, 1});
  checker check;
  world w(tenant_rules(sh), static_cast<int>(rng.between(2, 4)), check, store_kind::memory, p.variant);
  // In memory when the machine has /dev/shm: the writes fsync.
  const testing::temp_dir folder("sluice-sim-snapshot",
                                 std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp");
  const std::string file = (folder.path / "counters.bin").string();

  run_result out;
  window_counts model(sh.unit_s), written(sh.unit_s);
  std::int64_t next_write = start_us + interval;
  std::uint64_t graceful = 0, crashed = 0;
  const std::int64_t end = end_of(p);
  const auto now = run_arrivals(
      w, rng, check, traffic, end, out,
      [&](std::int64_t now, int tenant, std::uint32_t hits, const auto& st) {
        const std::int64_t window = model.move_to(now);
        auto& count = model.at(tenant, window);
        count += hits;
        const bool ok = count <= sh.requests;
        check.expect(st.code() == (ok ? rls_response::OK : rls_response::OVER_LIMIT) &&
                         st.limit_remaining() == (ok ? sh.requests - count : 0),
                     now - start_us, "tenant t", tenant, " after ", graceful, " restarts and ", crashed,
                     " crashes: the window's count is ", count, " of ", sh.requests, ", the store said ",
                     st.code() == rls_response::OK ? "OK" : "over the limit", " with ", st.limit_remaining(),
                     " left");
        // Between decisions: the periodic write, and a restart now and then.
        if (now >= next_write) {
          w.write_snapshot(file);
          written = model;
          next_write = now - (now - start_us) % interval + interval;
        }
        if (!rng.chance(restarts_per_hour * static_cast<double>(2 * traffic.mean_gap_us / traffic.clients) /
                        static_cast<double>(2 * hour)))
          return;
        if (rng.chance(crashes)) {
          ++crashed;
          model = written;
        } else {
          ++graceful;
          w.write_snapshot(file);
          written = model;
        }
        w.restart(file);
      });
  return check.finish(out, now);
}

}  // namespace snapshot_sim

leg snapshot_leg() {
  return {"snapshot memory", 0.15, snapshot_sim::run, {"restart that reads nothing back"}};
}

}  // namespace sluice::sim
