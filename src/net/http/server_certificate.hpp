#pragma once
// The HTTPS listener's certificate (HTTP_SERVER_TLS_CERT / HTTP_SERVER_TLS_KEY): loaded at start-up, reloaded
// when either file changes. A reload that fails keeps the certificate in use and says why in the log.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "core/file_watch.hpp"

namespace sluice::net::http {

class server_certificate {
 public:
  // Throws std::runtime_error naming the setting and the file that cannot be used.
  server_certificate(std::string cert_file, std::string key_file);
  ~server_certificate();

  // The context new connections use; a connection keeps the one it started with.
  std::shared_ptr<boost::asio::ssl::context> current() const { return std::atomic_load(&context_); }

  // Starts following changes of the two files (their directories are watched, so renames count).
  void watch(boost::asio::any_io_executor ex);
  void stop();

 private:
  void reload();

  const std::string cert_file_, key_file_;
  std::shared_ptr<boost::asio::ssl::context> context_;
  std::unique_ptr<core::file_watch> watch_;
};

}  // namespace sluice::net::http
