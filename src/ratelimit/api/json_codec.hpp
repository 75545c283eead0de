#pragma once
// The proto3 JSON mapping of RateLimitRequest / RateLimitResponse for POST /json, written on Boost.JSON for
// speed. Parsing accepts what protojson accepts (lowerCamelCase or original field names, enums by name or
// number, 64-bit integers as numbers or strings, null as the default) and rejects unknown fields; every error
// message says what is wrong and where (e.g. "descriptors[0].entries[1]: unknown field 'kye'").

#include <optional>
#include <string>
#include <string_view>

#include "core/problem.hpp"
#include "rls.pb.h"

namespace sluice::ratelimit::api {

using rls_request = envoy::service::ratelimit::v3::RateLimitRequest;
using rls_response = envoy::service::ratelimit::v3::RateLimitResponse;

// Fills `out` from a JSON body. Returns an error message, or nullopt on success.
core::problem parse_request_json(std::string_view body, rls_request& out);

// Serializes like protojson: lowerCamelCase names, enum names, zero values omitted, durations as "58s".
std::string response_to_json(const rls_response& response);

}  // namespace sluice::ratelimit::api
