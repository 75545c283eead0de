#pragma once
// What a decided response carries besides its statuses, when the settings ask for it: the RateLimit-* headers
// for the client and the upstream service (reference §6.2), and the dynamic metadata (reference §6.1).

#include <span>

#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/service.hpp"

namespace sluice::ratelimit::service {

// The headers of the status upstream chooses (the least remaining; the last OVER_LIMIT of a descriptor that
// is not a quota descriptor wins), as LIMIT_RESPONSE_HEADERS_ENABLED and LIMIT_REQUEST_HEADERS_ENABLED ask.
void add_limit_headers(rls_response& response, const settings& s,
                       std::span<const limiter::descriptor_work> items);

// The request as upstream describes it, and the `metadata` of every rule whose descriptor passed (`nodes`:
// each descriptor's matched rule, or null).
void add_dynamic_metadata(rls_response& response, const rls_request& request,
                          std::span<const config::descriptor_node* const> nodes);

}  // namespace sluice::ratelimit::service
