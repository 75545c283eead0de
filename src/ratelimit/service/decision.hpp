#pragma once
// One ShouldRateLimit decision in flight (service.cpp starts it): its resolution, then the limiter's
// operations sent to the backend, then the answer. Owns everything the backend and the response need until
// `done` is called; deletes itself when the backend completes.

#include <optional>

#include "ratelimit/service/resolution.hpp"
#include "tracing/tracer.hpp"

namespace sluice::ratelimit::service {

class decision final : public limiter::completion {
 public:
  decision(rate_limit_service& service, const rls_request& request, rls_response& response,
           rate_limit_service::done_fn done, tracing::span execution)
      : resolution_(service, request, resolving::for_decision),
        response_(response),
        done_(std::move(done)),
        execution_(std::move(execution)) {}

  void resolve();
  // Reads the Redis table rows needed, then sends the operations. From here it owns itself.
  void start();
  void complete(const limiter::backend_error* error) noexcept override;

 private:
  void send();
  void finish();
  void record_top(stats::top_recorder& top, std::span<limiter::response_status* const> statuses) const;
  bool is_quota(std::size_t i) const;
  rls_response::Code overall_code() const;

  resolution resolution_;
  rate_limit_service& service_ = resolution_.service;
  limiter::work& work_ = resolution_.work;
  rls_response& response_;
  rate_limit_service::done_fn done_;
  bool prechecking_ = false;
  tracing::span execution_;     // upstream's "ShouldRateLimit Execution"
  tracing::span backend_span_;  // the store's round trip (its own name), under it
};

}  // namespace sluice::ratelimit::service
