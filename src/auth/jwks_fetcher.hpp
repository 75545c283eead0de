#pragma once
// Fetches a JWKS document: https:// with Beast on the caller's executor (SNI, hostname verification, a
// deadline and a body limit), or file:// from disk for offline use.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <string>

namespace sluice::auth {

struct fetch_result {
  std::string body;
  std::string error;  // empty on success; for the log, never shown to clients
};

// Trusts the system CAs plus `extra_ca_file` (ECHO_JWKS_CACERT) when set; throws if that file is unusable.
std::shared_ptr<boost::asio::ssl::context> make_jwks_tls_context(const std::string& extra_ca_file);

boost::asio::awaitable<fetch_result> fetch_jwks(std::string uri,
                                                std::shared_ptr<boost::asio::ssl::context> tls,
                                                std::chrono::milliseconds timeout);

}  // namespace sluice::auth
