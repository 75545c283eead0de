#pragma once
// POST /explain on the debug listener (docs/guides/operate.md#explain-why-was-this-request-limited): for each
// descriptor of a /json request, the rule that matched and the walk that found it, the nearest rules that did
// not match and why, the limits that apply (overrides, limit tables, time zones) and what their counters
// hold. Nothing is counted and no stat changes. The walk is the first worker's, through its own rules (as its
// decisions walk them).

#include "net/http/debug_pages.hpp"
#include "ratelimit/api/counters_api.hpp"

namespace sluice::ratelimit::api {

net::http::debug_page explain_page(worker_services workers);

}  // namespace sluice::ratelimit::api
