#pragma once
// One call of the rate limit service in flight (service.cpp): a decision, or an operator's look at or change
// of a request's counters (counter_control.cpp), which resolve the request's descriptors the same way.

#include <boost/container/small_vector.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/service/counter_control.hpp"
#include "ratelimit/service/service.hpp"

namespace sluice::ratelimit::service {

// What is wrong with a request before any rule is looked up (an empty domain or key, an override's unit).
std::optional<std::string> validate_request(const rls_request& request);

// One decision in flight: owns everything the backend and the response need until done is called.
class request_state final : public limiter::completion {
 public:
  request_state(rate_limit_service& service, const rls_request& request, rls_response& response,
                rate_limit_service::done_fn done, tracing::span execution)
      : service_(service),
        request_(request),
        response_(response),
        done_(std::move(done)),
        held_(service.acquire_rules()),
        rules_(*held_->rules),
        execution_(std::move(execution)) {}
  // Operator control instead of a decision (counter_control.cpp).
  request_state(rate_limit_service& service, const rls_request& request, control_request control)
      : service_(service),
        request_(request),
        control_(std::make_unique<control_state>(std::move(control))),
        response_(control_->request.unused_response),
        held_(service.acquire_rules()),
        rules_(*held_->rules) {}
  ~request_state() { service_.release_rules(held_); }
  request_state(const request_state&) = delete;
  request_state& operator=(const request_state&) = delete;

  void resolve();
  // Operator control: why the request's counters cannot be set to a count (a holder_key counter named
  // without its holder), if so; and answering `error` instead (frees this).
  std::optional<std::string> unsettable() const;
  void fail_control(const service_error& error);
  // The Redis table rows resolve() could not find cached are read first.
  void start_after_tables();
  void start();
  void complete(const limiter::backend_error* error) noexcept override;

 private:
  void start_control();
  void complete_control(const limiter::backend_error* error);
  std::vector<descriptor_state> control_states() const;
  void finish();
  void record_top(stats::top_recorder& top, std::span<limiter::response_status* const> statuses) const;
  void add_limit(std::size_t i, const config::rate_limit& rule, const config::descriptor_node& node,
                 const std::optional<std::string>& stats_key);
  void use_table(std::size_t i, const config::descriptor_node& node);
  bool is_quota(std::size_t i) const;
  rls_response::Code overall_code() const;

  rate_limit_service& service_;
  const rls_request& request_;
  // Operator control's own state; null for a decision (which then carries none of it).
  struct control_state {
    explicit control_state(control_request r) : request(std::move(r)) {}
    control_request request;
    std::vector<std::vector<std::string>> keys;  // per descriptor, each limit's stats key
    std::vector<bool> replaced;                  // per descriptor: another rule's `replaces` took it out
  };
  std::unique_ptr<control_state> control_;
  rls_response& response_;
  rate_limit_service::done_fn done_;
  rate_limit_service::held_rules* held_;  // keeps the rule nodes alive until done
  const config::rule_set& rules_;
  boost::container::small_vector<config::entry, 8> entries_;
  // Per descriptor: the matched rule's node (its name, quota_mode and metadata); null without a rule.
  limiter::small_vector<const config::descriptor_node*> nodes_;
  limiter::work work_;
  // Per descriptor: the key tag of a table row whose unit is not its rule's (table_rows.hpp).
  limiter::small_vector<std::string> row_tags_;
  // Redis table rows to read before deciding, and the descriptors they are for.
  std::vector<table_lookup::wanted> fetches_;
  std::vector<std::size_t> fetched_items_;
  bool prechecking_ = false;
  bool all_or_nothing_ = false;  // COUNT_ONLY_ADMITTED, or a matched rule's count_only_admitted
  tracing::span execution_;      // upstream's "ShouldRateLimit Execution"
  tracing::span backend_span_;   // the store's round trip (its own name), under it
};

}  // namespace sluice::ratelimit::service
