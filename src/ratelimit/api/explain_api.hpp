#pragma once
// POST /explain on the debug listener (README "Operating Sluice"): for each descriptor of a /json request,
// the rule that matched and the walk that found it, the nearest rules that did not match and why, the
// limits that apply (overrides, limit tables, time zones) and what their counters hold. Nothing is counted
// and no stat changes.

#include "net/http/debug_pages.hpp"
#include "ratelimit/api/counters_api.hpp"
#include "ratelimit/service/rules_source.hpp"

namespace sluice::ratelimit::api {

net::http::debug_page explain_page(worker_services workers, const service::rules_source& rules);

}  // namespace sluice::ratelimit::api
