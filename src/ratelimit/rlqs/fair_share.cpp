#include "ratelimit/rlqs/fair_share.hpp"

#include <algorithm>

namespace sluice::ratelimit::rlqs {

void needs_of(std::span<const double> demands, double budget, std::vector<double>& out) {
  out.clear();
  if (demands.empty()) return;
  const double floor = budget * demand_floor_share / static_cast<double>(demands.size());
  for (double d : demands) out.push_back(std::max(d * demand_headroom, floor));
}

share_plan plan_shares(std::span<const double> needs, double budget) {
  share_plan plan;
  if (needs.empty()) return plan;
  double total = 0;
  for (double n : needs) total += n;
  if (total <= budget) {
    plan.surplus_each = (budget - total) / static_cast<double>(needs.size());
    return plan;
  }
  // Ascending needs: each client below the level takes its need, the rest split what remains equally.
  std::vector<double> sorted(needs.begin(), needs.end());
  std::sort(sorted.begin(), sorted.end());
  double left = budget;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const double equal = left / static_cast<double>(sorted.size() - i);
    if (sorted[i] >= equal) {
      plan.level = equal;
      return plan;
    }
    left -= sorted[i];
  }
  plan.level = sorted.back();  // unreachable when total > budget; kept for rounding
  return plan;
}

}  // namespace sluice::ratelimit::rlqs
