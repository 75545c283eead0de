#pragma once
// The rate limit service's debug page: /rlconfig, the loaded rules in upstream's line format (reference
// §2.6).

#include "net/http/debug_pages.hpp"
#include "ratelimit/service/rules_source.hpp"

namespace sluice::ratelimit::api {

net::http::debug_page rlconfig_page(const service::rules_source& source);

}  // namespace sluice::ratelimit::api
