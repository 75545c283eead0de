#include "echo/echo_api.hpp"

#include <boost/beast/http/field.hpp>

#include "core/strings.hpp"
#include "echo/credentials.hpp"
#include "echo/handlers.hpp"

namespace sluice::echo {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

namespace {

// ESPv2's texts (reference echo-api.md §4).
constexpr std::string_view jwt_missing = "Jwt is missing";
constexpr std::string_view key_missing =
    "UNAUTHENTICATED: Method doesn't allow unregistered callers (callers without established identity). "
    "Please "
    "use API Key or other form of API consumer identity to call this API.";
constexpr std::string_view key_invalid = "INVALID_ARGUMENT: API key not valid. Please pass a valid API key.";
constexpr std::string_view key_disabled =
    "PERMISSION_DENIED: API key is disabled. Please use an enabled API key or ask for this one to be "
    "enabled.";

net::http::response jwt_error(const net::http::request& req, unsigned status, std::string_view message,
                              bool token_present) {
  auto res = net::http::json_error(req, static_cast<bhttp::status>(status), message);
  res.set(bhttp::field::www_authenticate, token_present ? R"(Bearer, error="invalid_token")" : "Bearer");
  return res;
}

std::optional<net::http::response> check_api_key(const auth::api_key_store& keys,
                                                 const net::http::request& req) {
  auto key = api_key(req);
  if (!key) return net::http::json_error(req, bhttp::status::unauthorized, key_missing);
  switch (keys.lookup(*key).state) {
    case auth::key_state::valid:
      return std::nullopt;
    case auth::key_state::disabled:
      return net::http::json_error(req, bhttp::status::forbidden, key_disabled);
    case auth::key_state::unknown:
      break;
  }
  return net::http::json_error(req, bhttp::status::bad_request, key_invalid);
}

}  // namespace

echo_api::echo_api(openapi_document document, const auth::api_key_store* keys, auth::jwt_verifier& verifier,
                   std::size_t max_body_bytes)
    : document_(std::move(document)), max_body_bytes_(max_body_bytes), keys_(keys), verifier_(verifier) {
  for (const auto& op : document_.operations) by_path_[op.path].push_back(&op);
}

void echo_api::add_routes(net::http::router& routes) const {
  for (const auto& entry : by_path_) {
    const auto* ops = &entry.second;
    routes.add(entry.first, [this, ops](const net::http::request& req) { return serve(*ops, req); });
  }
}

asio::awaitable<net::http::response> echo_api::serve(const std::vector<const operation*>& ops,
                                                     const net::http::request& req) const {
  for (const operation* op : ops)
    if (req.method_string() == op->method) co_return co_await run(*op, req);
  std::string allowed;
  for (const operation* op : ops) allowed += (allowed.empty() ? "" : ", ") + op->method;
  auto res =
      net::http::json_error(req, bhttp::status::method_not_allowed,
                            core::cat("Method ", std::string_view(req.method_string()),
                                      " is not allowed for ", ops.front()->path, "; allowed: ", allowed));
  res.set(bhttp::field::allow, allowed);
  co_return res;
}

asio::awaitable<net::http::response> echo_api::run(const operation& op, const net::http::request& req) const {
  std::optional<auth::jwt_claims> claims;
  if (!op.jwt_providers.empty()) {
    auto token = bearer_token(req);
    if (!token || token->empty()) co_return jwt_error(req, 401, jwt_missing, false);
    auto verified = co_await verifier_.verify(*token, op.jwt_providers);
    if (auto* failure = std::get_if<auth::jwt_failure>(&verified))
      co_return jwt_error(req, failure->http_status, failure->message, failure->token_present);
    claims = std::move(std::get<auth::jwt_claims>(verified));
  }
  if (op.api_key)
    if (auto error = check_api_key(*keys_, req)) co_return std::move(*error);
  if (op.kind == operation_kind::echo) co_return echo_response(req, max_body_bytes_);
  co_return auth_info_response(req, claims ? &*claims : nullptr);
}

net::http::response not_defined(const net::http::request& req) {
  return net::http::json_error(req, bhttp::status::not_found,
                               "The current request is not defined by this API.");
}

}  // namespace sluice::echo
