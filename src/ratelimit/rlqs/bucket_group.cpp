#include "ratelimit/rlqs/bucket_group.hpp"

#include <algorithm>

namespace sluice::ratelimit::rlqs {

namespace {

// The tightest of a rule's limits (by rate) is the bucket's budget.
budget budget_of(const config::descriptor_node& node) {
  auto of = [](const config::rate_limit& l) {
    return budget{l.requests_per_unit, std::max<std::int64_t>(1, l.window_seconds()), l.unit,
                  l.unit_multiplier};
  };
  budget b = of(*node.limit);
  for (const auto& more : node.more_limits) {
    if (more.unlimited) continue;
    const budget other = of(more);
    if (other.rate() < b.rate()) b = other;
  }
  return b;
}

}  // namespace

policy match_policy(const config::rule_set* rules, std::string_view domain, const bucket_key& key) {
  policy p;
  if (rules == nullptr) return p;
  const auto* root = rules->find_domain(domain);
  if (root == nullptr) return p;
  const auto entries = key.entries();
  const auto m = rules->get_limit(*root, entries);
  if (m.node == nullptr || !m.node->limit) return p;
  p.rule = m.node->stats_key;
  p.shadow_mode = m.node->shadow_mode;
  if (m.node->limit->unlimited || p.shadow_mode) return p;
  p.budget = budget_of(*m.node);
  p.what = p.budget.requests == 0 ? policy::kind::deny_all : policy::kind::shared;
  return p;
}

rule_quota_stats rule_quota_stats::make(stats::store& store, const std::string& rule) {
  if (rule.empty()) return {};
  const std::string prefix = "ratelimit.service.rate_limit." + rule + ".rlqs_";
  return {&store.get_counter(prefix + "allowed"), &store.get_counter(prefix + "denied"),
          &store.get_gauge(prefix + "assigned")};
}

}  // namespace sluice::ratelimit::rlqs
