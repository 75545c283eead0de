#pragma once
// One HTTP/1.1 call to the debug listener, for `sluice counters` and `sluice explain`: a plain blocking
// exchange with a deadline.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/verb.hpp>

namespace sluice::ratelimit::client {

struct debug_reply {
  unsigned status = 0;
  std::string reason;
  std::string body;
};

// `address` is host:port. Throws std::exception with a message for the user: a server that cannot be reached
// in connect_error.hpp's wording, a timeout, a connection dropped before the answer.
debug_reply call_debug(const std::string& address, boost::beast::http::verb method, const std::string& target,
                       std::string body, const std::vector<std::pair<std::string, std::string>>& headers,
                       std::chrono::nanoseconds timeout);

// The call, for a command: a 200's body on stdout (exit status 0), anything else on stderr after
// "sluice <command>: " (exit status 2).
int run_debug_call(std::string_view command, const std::string& address, boost::beast::http::verb method,
                   const std::string& target, std::string body,
                   const std::vector<std::pair<std::string, std::string>>& headers,
                   std::chrono::nanoseconds timeout);

}  // namespace sluice::ratelimit::client
