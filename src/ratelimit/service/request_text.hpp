#pragma once
// A decision's request, and a descriptor's limit override, as Go's String() prints them
// (tracing/proto_text.hpp) but written without reflection, a tenth of the cost: upstream puts the request in
// the execution span's "request string" and the override in dynamic metadata.

#include <string>

#include "ratelimit/service/service.hpp"

namespace sluice::ratelimit::service {

using RateLimitOverride = envoy::extensions::common::ratelimit::v3::RateLimitDescriptor::RateLimitOverride;

std::string go_text(const rls_request& request);
std::string go_text(const RateLimitOverride& limit);

}  // namespace sluice::ratelimit::service
