#pragma once
// Where a request carries its credentials, as ESPv2 looks for them (reference echo-api.md §4): the JWT in
// `Authorization: Bearer <token>` or the `access_token` query parameter; the API key in the query parameter
// `key`, then `api_key`, then the header `x-api-key`.

#include <optional>
#include <string>
#include <string_view>

#include "net/http/router.hpp"

namespace sluice::echo {

// An Authorization header without the Bearer scheme does not count (ESPv2 then reports "Jwt is missing").
std::optional<std::string> bearer_token(const net::http::request& req);

std::optional<std::string> api_key(const net::http::request& req);

}  // namespace sluice::echo
