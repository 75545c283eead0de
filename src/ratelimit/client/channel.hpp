#pragma once
// The gRPC channel the client commands dial from their connection flags: -dial_string or -unix, cleartext
// or TLS (-grpc-server-ca-file, mutual TLS with -grpc-cert-file/-grpc-key-file, -grpc-server-name).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>

#include <string>

#include "core/problem.hpp"
#include "ratelimit/client/client_flags.hpp"

namespace sluice::ratelimit::client {

// Throws std::runtime_error naming the flag whose file cannot be read.
std::shared_ptr<grpc::Channel> open_channel(const client_options& o);

// "cannot connect to ADDRESS: REASON" (connect_error.hpp) when a call ended with `status` because `channel`
// never reached the server; nothing when the server answered (its own UNAVAILABLE included).
core::problem connect_failure(const grpc::Status& status, grpc::Channel& channel, const client_options& o);

}  // namespace sluice::ratelimit::client
