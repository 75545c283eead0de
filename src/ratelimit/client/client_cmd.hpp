#pragma once
// `sluice client`: upstream's client_cmd (one ShouldRateLimit call, the answer printed) with what debugging a
// real deployment needs: hits, Unix sockets, TLS and mutual TLS, JSON output, and an exit status that tells
// OK (0), OVER_LIMIT (1) and errors (2) apart. A gRPC C++ client: it works against any Envoy RLS server.

#include <span>
#include <string_view>

#include "ratelimit/client/client_flags.hpp"
#include "rls.pb.h"

namespace sluice::ratelimit::client {

// args: the flags after "client".
int run_client(std::span<const std::string_view> args);

// The request the flags describe (`sluice explain` sends it too).
envoy::service::ratelimit::v3::RateLimitRequest build_request(const client_options& o);

}  // namespace sluice::ratelimit::client
