#pragma once
// What a decided response carries besides its statuses, when the settings ask for it: the RateLimit-* headers
// for the client and the upstream service (reference §6.2), and the dynamic metadata (reference §6.1).

#include <span>

#include "ratelimit/config/rule_set.hpp"
#include "ratelimit/limiter/limiter.hpp"
#include "ratelimit/service/service.hpp"

namespace sluice::ratelimit::service {

// The headers of the status upstream chooses (the least remaining; the last OVER_LIMIT of a descriptor that
// is not a quota descriptor wins), as LIMIT_RESPONSE_HEADERS_ENABLED and LIMIT_REQUEST_HEADERS_ENABLED ask;
// or, with LIMIT_RESPONSE_HEADERS_FORMAT=ietf, RateLimit-Policy and RateLimit for the client. `nodes`: each
// descriptor's matched rule, or null (the IETF fields name the limits).
void add_limit_headers(rls_response& response, const settings& s,
                       std::span<const limiter::descriptor_work> items,
                       std::span<const config::descriptor_node* const> nodes, std::string_view domain);

// The request as upstream describes it, and the `metadata` of every rule whose descriptor passed (`nodes`:
// each descriptor's matched rule, or null).
void add_dynamic_metadata(rls_response& response, const rls_request& request,
                          std::span<const config::descriptor_node* const> nodes);

// LIMITED_BY_METADATA: `limited_by` in the dynamic metadata, one entry per descriptor over its limit (shadow
// mode's marked): {"domain", "rule" (its stats key), "entries": ["k=v", ...], "shadow", "limit": {...}}.
// Merged with what RESPONSE_DYNAMIC_METADATA puts there.
void add_limited_by(rls_response& response, std::string_view domain,
                    std::span<const limiter::descriptor_work> items,
                    std::span<const config::descriptor_node* const> nodes, bool global_shadow_mode);

// The stats key of a limit override: "<domain>.<k1>[_<v1>].<k2>[_<v2>]...".
std::string override_stats_key(std::string_view domain, std::span<const config::entry> entries);

}  // namespace sluice::ratelimit::service
