// Operator control (counter_control.hpp): a request resolved as a decision resolves it, then its limits'
// counters read or overwritten through the backend instead of counted.

#include <date/tz.h>

#include "core/strings.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "ratelimit/service/request_state.hpp"

namespace sluice::ratelimit::service {

void rate_limit_service::control(const rls_request& request, control_action action, std::uint64_t used,
                                 control_done done) {
  const service_error* problem = nullptr;
  service_error e;
  if (auto invalid = validate_request(request)) {
    e = {error_kind::invalid_argument, std::move(*invalid)};
    problem = &e;
  } else if (current_ == nullptr || !current_->rules) {
    e = {error_kind::unavailable, "no rate limit configuration loaded"};
    problem = &e;
  }
  if (problem != nullptr) return done(problem, {});
  auto state =
      std::make_unique<request_state>(*this, request, control_request{action, used, std::move(done), {}});
  state->resolve();
  if (action == control_action::overwrite && used > 0) {
    if (auto refused = state->unsettable()) {
      e = {error_kind::invalid_argument, std::move(*refused)};
      return state.release()->fail_control(e);
    }
  }
  // From here the state owns itself: complete() deletes it, possibly before start() returns.
  state.release()->start_after_tables();
}

std::optional<std::string> request_state::unsettable() const {
  for (const auto& item : work_.items) {
    if (!item.whole_holder_set) continue;
    const std::string_view key = item.entries.back().key;
    return core::cat("that counter is held per holder (holder_key: ", key, "): add the holder's entry (", key,
                     "=<id>) to set what it holds, or DELETE without it to free every holder");
  }
  return std::nullopt;
}

void request_state::fail_control(const service_error& error) {
  std::unique_ptr<request_state> self(this);
  auto done = std::move(control_->request.done);
  self.reset();
  done(&error, {});
}

void request_state::start_control() {
  auto& limiter = service_.limiter_;
  limiter.describe(work_);
  if (control_->request.action == control_action::inspect)
    return service_.backend_.inspect(work_.ops, work_.values, *this);
  for (auto& op : work_.ops) op.increment = limiter::limiter::overwrite_value(op, control_->request.used);
  // The worker's over-limit cache would go on refusing a key the operator reset.
  limiter.forget(work_);
  service_.backend_.overwrite(work_.ops, *this);
}

void request_state::complete_control(const limiter::backend_error* error) {
  std::unique_ptr<request_state> self(this);
  auto done = std::move(control_->request.done);
  std::optional<service_error> failure;
  std::vector<descriptor_state> states;
  if (error != nullptr) {
    failure = service_error{error_kind::unavailable, error->message};
  } else if (control_->request.action == control_action::inspect) {
    try {
      states = control_states();
    } catch (const std::exception& e) {
      failure = service_error{error_kind::internal, core::cat("internal error: ", e.what())};
    }
  }
  try {
    done(failure ? &*failure : nullptr, std::move(states));
  } catch (...) {
    // A completion must not throw; nothing more can be told to the caller.
  }
}

std::vector<descriptor_state> request_state::control_states() const {
  std::vector<descriptor_state> out(work_.items.size());
  for (std::size_t i = 0; i < work_.items.size(); ++i) {
    const auto& item = work_.items[i];
    auto& d = out[i];
    d.node = nodes_[i];
    d.unlimited = item.unlimited;
    d.replaced = control_->replaced[i];
    d.matched = d.node != nullptr || !item.limits.empty();
    for (std::size_t k = 0; k < item.limits.size(); ++k) {
      const auto& lw = item.limits[k];
      const auto& limit = lw.limit;
      auto& l = d.limits.emplace_back();
      l.rule = k < control_->keys[i].size() ? control_->keys[i][k] : std::string();
      if (limit.name != nullptr) l.name = *limit.name;
      l.algorithm = limit.algorithm;
      l.requests_per_unit = limit.requests_per_unit;
      l.unit = limit.unit;
      l.unit_multiplier = limit.unit_multiplier;
      if (limit.zone != nullptr) l.time_zone = limit.zone->name();
      l.shadow_mode = limit.shadow_mode;
      l.key = lw.cache_key;
      const auto state = service_.limiter_.state_of(work_, item, lw);
      l.used = state.used;
      l.capacity = state.capacity;
      l.remaining = state.remaining;
      l.reset_seconds = state.reset_seconds;
      const auto& r = work_.values[lw.op];
      const auto& op = work_.ops[lw.op];
      if (op.per_holder) {
        l.holder_key = std::string(item.entries.back().key);
        l.holders = r.holders;
        if (op.holder) {
          l.holder = std::string(*op.holder);
          l.holder_slots = r.holder_slots;
        }
      }
      // (a GCRA result's value is its arrival time, not before now: only counters have unsent hits)
      if (!limiter::decided_in_store(work_.ops[lw.op]))
        l.unsent = static_cast<std::int64_t>(r.value) - static_cast<std::int64_t>(r.before);
    }
  }
  return out;
}

}  // namespace sluice::ratelimit::service
