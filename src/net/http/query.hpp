#pragma once
// Query string parameters of a request target ("/path?a=1&b=x%20y"), as every module reads them.

#include <optional>
#include <string>
#include <string_view>

namespace sluice::net::http {

// The percent-decoded value of the first `name` parameter in the query of `target`; "" for a bare `?name`.
// A malformed escape is kept as it is, so the value still fails the check it is meant for.
std::optional<std::string> query_param(std::string_view target, std::string_view name);

}  // namespace sluice::net::http
