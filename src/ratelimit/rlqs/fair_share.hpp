#pragma once
// Max-min fair shares of one budget among clients with known demands (requests per second). Water-filling:
// a client that needs less than the level gets its need; the level is where the shares add up to the
// budget. When all needs together are below the budget, everyone gets its need plus an equal part of what is
// left, so a client that grows is not held at its old need until its next report.

#include <cstddef>
#include <limits>
#include <span>
#include <vector>

namespace sluice::ratelimit::rlqs {

// What a client's need counts as: its measured demand plus headroom to grow into, and never less than a
// small floor, so an idle client can still admit its next requests.
constexpr double demand_headroom = 1.10;     // need = demand × 1.1
constexpr double demand_floor_share = 0.05;  // the floors of all clients together: at most 5% of the budget

struct share_plan {
  double level = std::numeric_limits<double>::infinity();  // needs above it are cut to it
  double surplus_each = 0;  // added to every need when all needs fit (the level is then infinite)

  double share_for(double need) const { return need < level ? need + surplus_each : level; }
};

// The needs (demand with headroom and floor) of `demands` for a budget of `budget` requests per second.
void needs_of(std::span<const double> demands, double budget, std::vector<double>& out);
// The plan for these needs: Σ share_for(need) == budget (up to rounding) whenever there is a client.
share_plan plan_shares(std::span<const double> needs, double budget);

}  // namespace sluice::ratelimit::rlqs
