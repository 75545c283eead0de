#pragma once
// The echo API on the shared HTTP router: one route per path of the OpenAPI document. Each request is checked
// in ESP's order — JWT first, then the API key — before the operation's handler runs; failures answer with
// ESPv2's compact JSON errors {"code": <status>, "message": "..."}.

#include <map>
#include <string>
#include <vector>

#include "auth/api_key_store.hpp"
#include "auth/jwt_verifier.hpp"
#include "echo/handlers.hpp"
#include "echo/openapi.hpp"
#include "net/http/router.hpp"

namespace sluice::echo {

class echo_api {
 public:
  // `keys` (null when no operation needs a key) and `verifier` must outlive the routes.
  echo_api(openapi_document document, const auth::api_key_store* keys, auth::jwt_verifier& verifier,
           std::size_t max_body_bytes = default_echo_max_body_bytes);
  // Routes point into this object.
  echo_api(const echo_api&) = delete;
  echo_api& operator=(const echo_api&) = delete;

  // Registers every path of the document; the api must outlive the router.
  void add_routes(net::http::router& routes) const;

  const openapi_document& document() const { return document_; }

 private:
  boost::asio::awaitable<net::http::response> serve(const std::vector<const operation*>& ops,
                                                    const net::http::request& req) const;
  boost::asio::awaitable<net::http::response> run(const operation& op, const net::http::request& req) const;

  openapi_document document_;
  std::size_t max_body_bytes_;
  const auth::api_key_store* keys_;
  auth::jwt_verifier& verifier_;
  std::map<std::string, std::vector<const operation*>> by_path_;
};

// ESPv2's answer for a path the document does not define: 404 "The current request is not defined by this
// API."; main installs it as the router's fallback when the echo API is on.
net::http::response not_defined(const net::http::request& req);

}  // namespace sluice::echo
