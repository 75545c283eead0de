#include "ratelimit/service/service.hpp"

#include "ratelimit/service/decision.hpp"
#include "ratelimit/service/request_text.hpp"

namespace sluice::ratelimit::service {

rate_limit_service::rate_limit_service(settings s, limiter::limiter& limiter, limiter::backend& backend,
                                       stats::store& stats)
    : settings_(std::move(s)),
      limiter_(limiter),
      backend_(backend),
      stats_(stats),
      service_error_(stats.get_counter("ratelimit.service.call.should_rate_limit.service_error")),
      backend_error_(stats.get_counter("ratelimit.service.call.should_rate_limit.redis_error")),
      global_shadow_mode_(stats.get_counter("ratelimit.service.global_shadow_mode")),
      fail_open_(stats.get_counter("ratelimit.service.fail_open")) {}

rate_limit_service::~rate_limit_service() {
  // Decisions still in flight (a stop that abandoned them) keep theirs: leaked rather than freed under them.
  if (current_ != nullptr && current_->decisions == 0) delete current_;
}

void rate_limit_service::set_rules(std::shared_ptr<const config::rule_set> rules) {
  if (current_ != nullptr && current_->decisions == 0) delete current_;
  current_ = new held_rules{std::move(rules), 0};
}

rate_limit_service::held_rules* rate_limit_service::acquire_rules() {
  ++current_->decisions;
  return current_;
}

void rate_limit_service::release_rules(held_rules* held) {
  if (--held->decisions == 0 && held != current_) delete held;
}

void rate_limit_service::should_rate_limit(const rls_request& request, rls_response& response, done_fn done,
                                           const tracing::span* parent) {
  tracing::span execution;
  if (tracer_ != nullptr && parent != nullptr) {
    execution = tracer_->start_child(*parent, "ShouldRateLimit Execution");
    if (execution.recording()) {
      execution.set_attribute("domain", request.domain());
      execution.set_attribute("request string", go_text(request));
    }
  }
  if (auto problem = validate_request(request)) {
    service_error_.inc();
    service_error e{error_kind::invalid_argument, std::move(*problem)};
    execution.end();
    done(&e);
    return;
  }
  if (current_ == nullptr || !current_->rules) {
    service_error_.inc();
    service_error e{error_kind::unavailable, "no rate limit configuration loaded"};
    execution.end();
    done(&e);
    return;
  }
  auto state = std::make_unique<decision>(*this, request, response, std::move(done), std::move(execution));
  state->resolve();
  // From here the decision owns itself: complete() deletes it, possibly before start() returns.
  state.release()->start();
}

}  // namespace sluice::ratelimit::service
