// Operator control (counter_control.hpp): a request resolved as a decision resolves it (resolution.hpp), then
// its limits' counters read or overwritten through the backend instead of counted (inspection.hpp).

#include <date/tz.h>

#include "core/problem.hpp"
#include "core/strings.hpp"
#include "ratelimit/config/rule_explain.hpp"
#include "ratelimit/limiter/algorithms.hpp"
#include "ratelimit/service/inspection.hpp"

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
  auto state = std::make_unique<inspection>(*this, request, action, used, std::move(done));
  state->resolve();
  if (action == control_action::overwrite && used > 0) {
    if (auto refused = state->unsettable()) {
      e = {error_kind::invalid_argument, std::move(*refused)};
      auto answer = state->take_done();
      state.reset();
      return answer(&e, {});
    }
  }
  // From here the inspection owns itself: complete() deletes it, possibly before start() returns.
  state.release()->start();
}

core::problem inspection::unsettable() const {
  for (const auto& item : work_.items) {
    if (!item.whole_holder_set) continue;
    const std::string_view key = item.entries.back().key;
    return core::cat("that counter is held per holder (holder_key: ", key, "): add the holder's entry (", key,
                     "=<id>) to set what it holds, or DELETE without it to free every holder");
  }
  return std::nullopt;
}

void inspection::resolve() {
  resolution_.resolve();
}

void inspection::start() {
  resolution_.after_tables([this] { send(); });
}

void inspection::send() {
  service_.limiter_.describe(work_);
  // (explain reads as inspect does: only an overwrite changes a counter)
  if (action_ != control_action::overwrite) return service_.backend_.inspect(work_.ops, work_.values, *this);
  for (auto& op : work_.ops) op.increment = limiter::limiter::overwrite_value(op, used_);
  // The worker's over-limit cache would go on refusing a key the operator reset.
  service_.limiter_.forget(work_);
  service_.backend_.overwrite(work_.ops, *this);
}

void inspection::complete(const limiter::backend_error* error) noexcept {
  std::unique_ptr<inspection> self(this);
  auto done = std::move(done_);
  std::optional<service_error> failure;
  std::vector<descriptor_state> states;
  if (error != nullptr) {
    failure = service_error{error_kind::unavailable, error->message};
  } else if (action_ != control_action::overwrite) {
    try {
      states = this->states();
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

namespace {

// The walk of the descriptor's entries through the domain's rules, as text.
rule_walk walk_of(const rls_request& request, int i, const config::rule_set& rules) {
  rule_walk out;
  const auto& d = request.descriptors(i);
  if (d.has_limit()) {
    out.override = true;
    out.outcome = "the request sends its own limit (an override): no rule is looked up";
    return out;
  }
  const auto* domain = rules.find_domain(request.domain());
  if (domain == nullptr) {
    out.outcome = core::cat("domain '", request.domain(), "' is not configured: no rule applies");
    return out;
  }
  std::vector<config::entry> entries;
  for (const auto& e : d.entries()) entries.push_back({e.key(), e.value()});
  const auto walk = config::explain_match(*domain, entries);
  out.walked = true;
  out.outcome = walk.outcome;
  if (walk.rule != nullptr) {
    out.rule = walk.rule->stats_key;
    out.limits_from = walk.rule->limits_from;
  }
  for (std::size_t k = 0; k < walk.path.size(); ++k) {
    out.path.push_back({core::cat(entries[k].key, "=", entries[k].value), walk.path[k].node->stats_key,
                        std::string(config::matched_by_name(walk.path[k].how))});
  }
  for (const auto& c : walk.candidates) out.candidates.push_back({c.node->stats_key, c.level + 1, c.why});
  return out;
}

}  // namespace

std::vector<descriptor_state> inspection::states() const {
  std::vector<descriptor_state> out(work_.items.size());
  for (std::size_t i = 0; i < work_.items.size(); ++i) {
    const auto& item = work_.items[i];
    auto& d = out[i];
    d.node = resolution_.nodes[i];
    d.unlimited = item.unlimited;
    d.replaced = resolution_.replaced[i];
    d.matched = d.node != nullptr || !item.limits.empty();
    if (action_ == control_action::explain)
      d.walk = walk_of(resolution_.request, static_cast<int>(i), resolution_.rules());
    for (std::size_t k = 0; k < item.limits.size(); ++k) {
      const auto& lw = item.limits[k];
      const auto& limit = lw.limit;
      auto& l = d.limits.emplace_back();
      l.rule = k < resolution_.keys[i].size() ? resolution_.keys[i][k] : std::string();
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
      if (const auto* per_holder = op.as<limiter::holder_op>()) {
        l.holder_key = std::string(item.entries.back().key);
        l.holders = r.holders;
        if (per_holder->holder) {
          l.holder = std::string(*per_holder->holder);
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
