// The limiter's roles for the ops of an all-or-nothing batch (count_only_admitted): one job of its own.
#include <algorithm>

#include "ratelimit/limiter/limiter.hpp"

namespace sluice::ratelimit::limiter {

// The roles of an all-or-nothing batch's ops (backend.hpp, op_role), so that the batch applies exactly when
// the service will admit the request: over when a normal descriptor is over, or when every quota descriptor
// is (a descriptor with its limits in shadow mode, or giving hits back, is never over). Returns evaluate_only
// when the local cache already knows the request is over: then nothing is applied and the limits are only
// read.
batch_mode limiter::assign_roles(work& w) {
  bool refused = false;
  bool quota_free = false;  // a quota descriptor that cannot be over: the answer depends on no quota limit
  std::size_t quota_items = 0, quota_over = 0;
  std::uint32_t next_quota = op_role::first_quota;
  for (auto& item : w.items) {
    if (item.unlimited) continue;
    auto counts = [&](const limit_work& lw) { return !item.negative && !lw.limit.shadow_mode; };
    const bool can_be_over = std::ranges::any_of(item.limits, counts);
    const bool known_over = std::ranges::any_of(
        item.limits, [&](const limit_work& lw) { return counts(lw) && lw.over_via_local_cache; });
    std::uint32_t role = op_role::enforced;
    if (item.quota) {
      ++quota_items;
      quota_free = quota_free || !can_be_over;
      quota_over += known_over ? 1 : 0;
      role = known_over ? op_role::advisory : next_quota++;
    } else {
      refused = refused || known_over;
    }
    for (const auto& lw : item.limits) {
      if (lw.op != SIZE_MAX) w.ops[lw.op].role = counts(lw) ? role : op_role::advisory;
    }
  }
  if (quota_free) {
    for (auto& op : w.ops) {
      if (op.role >= op_role::first_quota) op.role = op_role::advisory;
    }
  } else if (quota_items > 0 && quota_over == quota_items) {
    refused = true;
  }
  return refused ? batch_mode::evaluate_only : batch_mode::all_or_nothing;
}

}  // namespace sluice::ratelimit::limiter
