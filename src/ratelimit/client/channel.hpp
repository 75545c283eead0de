#pragma once
// The gRPC channel the client commands dial from their connection flags: -dial_string or -unix, cleartext
// or TLS (-grpc-server-ca-file, mutual TLS with -grpc-cert-file/-grpc-key-file, -grpc-server-name).

#include <grpcpp/grpcpp.h>

#include <memory>

#include "ratelimit/client/client_flags.hpp"

namespace sluice::ratelimit::client {

// Throws std::runtime_error naming the flag whose file cannot be read.
std::shared_ptr<grpc::Channel> open_channel(const client_options& o);

}  // namespace sluice::ratelimit::client
