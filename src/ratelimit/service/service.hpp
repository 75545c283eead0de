#pragma once
// ShouldRateLimit orchestration (upstream's service.ShouldRateLimit): validates the request, resolves each
// descriptor against the current rule snapshot (or its limit override), applies `replaces`, drives the
// limiter and the backend, then builds the response: statuses, the overall code (quota mode), RateLimit-*
// response and request headers, dynamic metadata, global shadow mode.

#include <functional>
#include <memory>
#include <string>

#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/backend.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/counter_control.hpp"
#include "ratelimit/service/table_lookup.hpp"
#include "rls.pb.h"
#include "stats/store.hpp"
#include "stats/top_descriptors.hpp"
#include "tracing/tracer.hpp"

namespace sluice::ratelimit::service {

using rls_request = envoy::service::ratelimit::v3::RateLimitRequest;
using rls_response = envoy::service::ratelimit::v3::RateLimitResponse;

enum class error_kind { invalid_argument, unavailable, internal };

struct service_error {
  error_kind kind;
  std::string message;
};

// The three RateLimit-* figures of the descriptor closest to its limit, under these names.
struct limit_header_names {
  std::string limit = "RateLimit-Limit";
  std::string remaining = "RateLimit-Remaining";
  std::string reset = "RateLimit-Reset";
};

struct settings {
  bool global_shadow_mode = false;         // SHADOW_MODE
  bool global_quota_mode = false;          // QUOTA_MODE: every descriptor is a quota descriptor
  bool fail_open = false;                  // BACKEND_FAIL_OPEN: answer OK when the backend cannot count
  bool response_headers_enabled = false;   // LIMIT_RESPONSE_HEADERS_ENABLED
  limit_header_names response_headers;     // LIMIT_{LIMIT,REMAINING,RESET}_HEADER
  bool request_headers_enabled = false;    // LIMIT_REQUEST_HEADERS_ENABLED
  limit_header_names request_headers;      // LIMIT_REQUEST_{LIMIT,REMAINING,RESET}_HEADER
  bool response_dynamic_metadata = false;  // RESPONSE_DYNAMIC_METADATA
  bool limited_by_metadata = false;        // LIMITED_BY_METADATA: who limited, in the dynamic metadata
  bool ietf_headers = false;               // LIMIT_RESPONSE_HEADERS_FORMAT=ietf
  bool count_only_admitted = false;        // COUNT_ONLY_ADMITTED: a request over any limit consumes nothing
};

class rate_limit_service {
 public:
  // Called exactly once per decision, possibly before should_rate_limit returns; null means success.
  using done_fn = std::function<void(const service_error*)>;

  rate_limit_service(settings s, limiter::limiter& limiter, limiter::backend& backend, stats::store& stats);

  ~rate_limit_service();
  rate_limit_service(const rate_limit_service&) = delete;
  rate_limit_service& operator=(const rate_limit_service&) = delete;

  // One service per worker, used only on the worker's thread: its rules are set there (a reload posts them),
  // and a decision keeps the snapshot it started with.
  void set_rules(std::shared_ptr<const config::rule_set> rules);

  // Tracing on this worker: the decision's spans go under the caller's span. Null (the default): none.
  void set_tracer(tracing::tracer* tracer) { tracer_ = tracer; }
  // The worker's top descriptors (docs/guides/observe/dashboard.md), counted after each decision. Null (the
  // default): none.
  void set_top_recorder(stats::top_recorder* top) { top_ = top; }
  // The worker's limit tables (`limits_from`). Null (the default): a rule's table is never read (its own
  // limit applies).
  void set_table_lookup(table_lookup* tables) { tables_ = tables; }
  // The calendar windows this worker's decisions and controls used (read by tests).
  const limiter::calendar_cache& calendars() const { return calendars_; }

  // `request` and `response` must stay valid until `done` is called; `parent` (the server span, which may be
  // null) only during this call.
  void should_rate_limit(const rls_request& request, rls_response& response, done_fn done,
                         const tracing::span* parent = nullptr);

  // Operator control (counter_control.hpp) of the request's descriptors on this worker, with this worker's
  // rules: `request` must stay valid until `done` is called. Nothing is counted; no stat changes.
  void control(const rls_request& request, control_action action, std::uint64_t used, control_done done);

 private:
  friend class resolution;
  friend class decision;
  friend class inspection;

  // A snapshot as this service holds it: counted without atomics (only this service's thread touches it), so
  // decisions on different workers never share a reference count.
  struct held_rules {
    std::shared_ptr<const config::rule_set> rules;
    std::size_t decisions = 0;  // in flight with these rules
  };
  held_rules* acquire_rules();
  void release_rules(held_rules* held);

  settings settings_;
  limiter::limiter& limiter_;
  limiter::backend& backend_;
  stats::store& stats_;
  tracing::tracer* tracer_ = nullptr;
  stats::top_recorder* top_ = nullptr;
  table_lookup* tables_ = nullptr;
  // This worker's calendar windows: the limiter is shared by every worker, its caller's state is not.
  limiter::calendar_cache calendars_;
  held_rules* current_ = nullptr;  // owned; older snapshots are freed by their last decision
  stats::counter& service_error_;
  stats::counter& backend_error_;
  stats::counter& global_shadow_mode_;
  stats::counter& fail_open_;
};

}  // namespace sluice::ratelimit::service
