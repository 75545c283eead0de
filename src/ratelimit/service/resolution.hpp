#pragma once
// A request resolved against one worker's rules: per descriptor its entries and hits, the matched rule, and
// the limits that apply (rules, overrides sent in the request, `replaces`, limit tables). A decision
// (decision.hpp) and an operator's inspection or change of the counters (inspection.hpp) are each built on
// one, so /counters and /explain see exactly what a decision would. They differ only in a limit's stats: a
// decision binds the counters its answer counts into; an inspection names each limit's stats key, changes no
// stat, and may address a holder_key counter's whole set of holders.

#include <boost/container/small_vector.hpp>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/problem.hpp"
#include "ratelimit/service/service.hpp"

namespace sluice::ratelimit::service {

// What is wrong with a request before any rule is looked up (an empty domain or key, an override's unit).
core::problem validate_request(const rls_request& request);

enum class resolving : std::uint8_t { for_decision, for_inspection };

class resolution {
 public:
  // Holds the service's current rules until destroyed.
  resolution(rate_limit_service& service, const rls_request& request, resolving purpose)
      : service(service),
        request(request),
        purpose_(purpose),
        held_(service.acquire_rules()),
        rules_(*held_->rules) {}
  ~resolution() { service.release_rules(held_); }
  resolution(const resolution&) = delete;
  resolution& operator=(const resolution&) = delete;

  void resolve();
  const config::rule_set& rules() const { return rules_; }
  // The Redis table rows resolve() found no cached value for are read first; then `then` runs (at once when
  // there are none).
  template <typename F>
  void after_tables(F then) {
    if (fetches_.empty()) return then();  // (no std::function on a decision's usual path)
    fetch_tables(std::move(then));
  }

  rate_limit_service& service;
  const rls_request& request;
  limiter::work work;
  // Per descriptor: the matched rule's node (its name, quota_mode and metadata); null without a rule.
  limiter::small_vector<const config::descriptor_node*> nodes;
  bool all_or_nothing = false;  // a matched rule's count_only_admitted
  // For an inspection, per descriptor: each limit's stats key, and whether another rule's `replaces` took
  // the descriptor out. (Empty for a decision.)
  std::vector<std::vector<std::string>> keys;
  std::vector<bool> replaced;

 private:
  void resolve_descriptor(int i, const config::descriptor_node* domain,
                          std::unordered_set<std::string_view>& replaced_names);
  void add_override(int i);
  void drop_replaced(const std::unordered_set<std::string_view>& replaced_names);
  void add_limit(std::size_t i, const config::rate_limit& rule, const config::descriptor_node& node,
                 const std::optional<std::string>& stats_key);
  void use_table(std::size_t i, const config::descriptor_node& node);
  void fetch_tables(std::function<void()> then);

  const resolving purpose_;
  rate_limit_service::held_rules* held_;  // keeps the rule nodes alive until done
  const config::rule_set& rules_;
  boost::container::small_vector<config::entry, 8> entries_;
  // Per descriptor: the key tag of a table row whose unit is not its rule's (table_rows.hpp).
  limiter::small_vector<std::string> row_tags_;
  // Redis table rows to read before deciding, and the descriptors they are for.
  std::vector<table_lookup::wanted> fetches_;
  std::vector<std::size_t> fetched_items_;
};

}  // namespace sluice::ratelimit::service
