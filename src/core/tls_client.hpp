#pragma once
// What the Redis and memcached clients share for TLS to their servers: the context made from the CA and
// client-certificate files, and the per-connection SNI and host name check.

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "core/env.hpp"

namespace sluice::core {

struct tls_client_config {
  bool enabled = false;
  std::string ca_file;    // empty: the system's default CAs
  std::string cert_file;  // client certificate (mutual TLS), with key_file
  std::string key_file;
  bool skip_hostname_verification = false;
};

// The settings that name a client's TLS files, declared by the module that reads them (REDIS_TLS_*,
// MEMCACHE_TLS_*).
struct tls_client_settings {
  const setting& ca_file;
  const setting& cert_file;
  const setting& key_file;
  const setting& skip_hostname_verification;
};
// The certificate and key set together, and every file named existing (else core::settings_error).
tls_client_config read_tls_client_files(const env_reader& env, const tls_client_settings& names,
                                        bool enabled);

// The settings that name each file, for error messages (e.g. REDIS_TLS_CACERT).
struct tls_client_setting_names {
  std::string_view ca_file, cert_file, key_file;
};

// Null without TLS; throws std::runtime_error naming the setting of a file that cannot be loaded.
std::shared_ptr<boost::asio::ssl::context> make_tls_client_context(const tls_client_config& tls,
                                                                   const tls_client_setting_names& names);

// SNI (for names only: RFC 6066 does not allow addresses there) and, unless skipped, the check that the
// server's certificate is for `host`. Before the handshake.
template <typename Stream>
void prepare_tls_client(boost::asio::ssl::stream<Stream>& stream, const std::string& host,
                        bool skip_hostname_verification);

// "host" of "host:port" ("[::1]:6379" gives "::1").
std::string host_of(const std::string& address);
// Whether `host` is an IP address rather than a name.
bool is_ip_address(const std::string& host);

template <typename Stream>
void prepare_tls_client(boost::asio::ssl::stream<Stream>& stream, const std::string& host,
                        bool skip_hostname_verification) {
  if (!is_ip_address(host)) SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());
  if (!skip_hostname_verification) stream.set_verify_callback(boost::asio::ssl::host_name_verification(host));
}

}  // namespace sluice::core
