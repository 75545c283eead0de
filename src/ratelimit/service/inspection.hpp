#pragma once
// An operator's look at or change of a request's counters (counter_control.hpp; rate_limit_service::control
// starts it): its resolution, then each limit's counter read or overwritten through the backend, never
// counted. Deletes itself when the backend completes.

#include <optional>
#include <string>
#include <vector>

#include "core/problem.hpp"
#include "ratelimit/service/counter_control.hpp"
#include "ratelimit/service/resolution.hpp"

namespace sluice::ratelimit::service {

class inspection final : public limiter::completion {
 public:
  inspection(rate_limit_service& service, const rls_request& request, control_action action,
             std::uint64_t used, control_done done)
      : resolution_(service, request, resolving::for_inspection),
        action_(action),
        used_(used),
        done_(std::move(done)) {}

  void resolve();
  // Why the request's counters cannot be set to a count (a holder_key counter named without its holder).
  core::problem unsettable() const;
  // The answer, for a caller that answers without starting.
  control_done take_done() { return std::move(done_); }
  // Reads the Redis table rows needed, then reads or overwrites. From here it owns itself.
  void start();
  void complete(const limiter::backend_error* error) noexcept override;

 private:
  void send();
  std::vector<descriptor_state> states() const;

  resolution resolution_;
  rate_limit_service& service_ = resolution_.service;
  limiter::work& work_ = resolution_.work;
  control_action action_;
  std::uint64_t used_;
  control_done done_;
};

}  // namespace sluice::ratelimit::service
