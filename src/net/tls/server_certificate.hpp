#pragma once
// A TLS server's certificate (and, for mutual TLS, the CA that client certificates must chain to): loaded at
// start-up, reloaded when any of its files changes. A reload that fails keeps the context in use and says why
// in the log. Used by the HTTPS listener (HTTP_SERVER_TLS_*) and the gRPC listener (GRPC_SERVER_TLS_*,
// GRPC_CLIENT_TLS_*).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "core/file_watch.hpp"

namespace sluice::net::tls {

struct certificate_options {
  std::string cert_file;
  std::string key_file;
  // The settings that named the files, for error messages.
  std::string cert_setting = "HTTP_SERVER_TLS_CERT";
  std::string key_setting = "HTTP_SERVER_TLS_KEY";
  // Mutual TLS: clients must present a certificate that chains to this CA ("" = no client certificate).
  std::string client_ca_file;
  std::string client_ca_setting = "GRPC_CLIENT_TLS_CACERT";
  // With a client CA: the client certificate must also name this DNS SAN and allow client authentication.
  std::string client_san;
  bool alpn_h2 = false;  // offer (and require, when the client uses ALPN) HTTP/2
  std::string description = "HTTP server certificate";  // for log lines
};

class server_certificate {
 public:
  // Throws std::runtime_error naming the setting and the file that cannot be used.
  explicit server_certificate(certificate_options options);
  ~server_certificate();

  // The context new connections use; a connection keeps the one it started with.
  std::shared_ptr<boost::asio::ssl::context> current() const { return std::atomic_load(&context_); }

  // Starts following changes of the files (their directories are watched, so renames count).
  void watch(boost::asio::any_io_executor ex);
  void stop();

 private:
  void reload();

  const certificate_options options_;
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::unique_ptr<core::file_watch> watch_;
  std::string last_read_;  // the files as last loaded or refused (control thread only)
};

}  // namespace sluice::net::tls
