#include "net/http/server_certificate.hpp"

#include <stdexcept>
#include <vector>

#include "core/log.hpp"
#include "core/strings.hpp"

namespace sluice::net::http {

namespace ssl = boost::asio::ssl;

namespace {

std::shared_ptr<ssl::context> load(const std::string& cert_file, const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec)
    throw std::runtime_error(core::cat("HTTP_SERVER_TLS_CERT: cannot use '", cert_file, "': ", ec.message()));
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec)
    throw std::runtime_error(core::cat("HTTP_SERVER_TLS_KEY: cannot use '", key_file, "': ", ec.message()));
  return ctx;
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

server_certificate::server_certificate(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)),
      context_(load(cert_file_, key_file_)) {}

server_certificate::~server_certificate() {
  stop();
}

void server_certificate::watch(boost::asio::any_io_executor ex) {
  std::vector<core::file_watch::target> targets{{parent_directory(cert_file_), std::nullopt}};
  if (auto key_dir = parent_directory(key_file_); key_dir != targets.front().directory)
    targets.push_back({key_dir, std::nullopt});
  watch_ = std::make_unique<core::file_watch>(std::move(ex), std::move(targets),
                                              std::chrono::milliseconds(100), [this] { reload(); });
  watch_->start();
}

void server_certificate::stop() {
  if (watch_) watch_->stop();
}

void server_certificate::reload() {
  try {
    std::atomic_store(&context_, load(cert_file_, key_file_));
    core::log_warn("reloaded the HTTP server certificate from ", cert_file_);
  } catch (const std::exception& e) {
    core::log_error(e.what(), " (keeping the previous certificate)");
  }
}

}  // namespace sluice::net::http
