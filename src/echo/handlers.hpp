#pragma once
// The sample backend's two operations, after the checks passed: echo, and the caller's authentication info in
// the shape ESP forwards it (reference echo-api.md §2–3).

#include "auth/jwt_verifier.hpp"
#include "net/http/router.hpp"

namespace sluice::echo {

// POST /echo: {"message": "<string>"} -> 200 {"message": "<string>"}; anything else -> 400 saying what is
// wrong.
// ECHO_MAX_BODY_BYTES' default: an echo message is small; larger bodies get 400 (the server's own
// HTTP_MAX_BODY_BYTES, checked before, answers 413).
inline constexpr std::size_t default_echo_max_body_bytes = 64 * 1024;

net::http::response echo_response(const net::http::request& req,
                                  std::size_t max_body_bytes = default_echo_max_body_bytes);

// GET /auth/info/*: {"id": sub, "email", "issuer", "audiences", "claims"} (empty fields left out, as ESP
// does), or {"id": "anonymous"} on a route that needs no token.
net::http::response auth_info_response(const net::http::request& req, const auth::jwt_claims* claims);

}  // namespace sluice::echo
