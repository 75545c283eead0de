#pragma once
// The one wording every subcommand gives a server it cannot reach, whatever the transport (gRPC for client
// and rlqs-client, HTTP for counters and explain): "cannot connect to 127.0.0.1:6070: connection refused".
// The reason is the system's, in the words a user knows; never a library's source location or error category.

#include <boost/system/error_code.hpp>
#include <chrono>
#include <string>
#include <string_view>

namespace sluice::ratelimit::client {

std::string cannot_connect(std::string_view address, std::string_view reason);

// A socket error as a reason: "connection refused", "no answer within 5s" for a timeout (`waited`).
std::string error_reason(const boost::system::error_code& ec, std::chrono::nanoseconds waited);

// A gRPC status's message as a reason when it says why a connection failed ("connection refused", "cannot
// resolve the host name"), else the message itself.
std::string grpc_reason(std::string_view message);

}  // namespace sluice::ratelimit::client
