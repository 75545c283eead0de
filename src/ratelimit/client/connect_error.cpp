#include "ratelimit/client/connect_error.hpp"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <cctype>

#include "core/env.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::client {

namespace {

bool contains_nocase(std::string_view text, std::string_view part) {
  for (std::size_t i = 0; i + part.size() <= text.size(); ++i) {
    if (core::iequals(text.substr(i, part.size()), part)) return true;
  }
  return false;
}

}  // namespace

std::string cannot_connect(std::string_view address, std::string_view reason) {
  return core::cat("cannot connect to ", address, ": ", reason);
}

std::string error_reason(const boost::system::error_code& ec, std::chrono::nanoseconds waited) {
  if (ec == boost::beast::error::timeout || ec == boost::asio::error::timed_out)
    return core::cat("no answer within ", core::format_go_duration(waited));
  if (ec == boost::asio::error::host_not_found || ec == boost::asio::error::host_not_found_try_again)
    return "cannot resolve the host name";
  std::string text = ec.message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string grpc_reason(std::string_view message) {
  if (contains_nocase(message, "connection refused")) return "connection refused";
  if (contains_nocase(message, "DNS resolution failed")) return "cannot resolve the host name";
  if (contains_nocase(message, "No such file or directory")) return "no such socket";
  if (contains_nocase(message, "Connection timed out")) return "connection timed out";
  // "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:8081: <the reason>": the reason.
  constexpr std::string_view framing = "failed to connect to all addresses; last error: ";
  if (message.starts_with(framing)) {
    message.remove_prefix(framing.size());
    for (std::string_view status : {"UNKNOWN: ", "UNAVAILABLE: ", "INTERNAL: "}) {
      if (message.starts_with(status)) message.remove_prefix(status.size());
    }
    for (std::string_view peer : {"ipv4:", "ipv6:", "unix:"}) {
      if (!message.starts_with(peer)) continue;
      const auto end = message.find(": ");
      if (end != std::string_view::npos) message.remove_prefix(end + 2);
    }
  }
  std::string text(message);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

}  // namespace sluice::ratelimit::client
