#include "net/tls/server_certificate.hpp"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <stdexcept>
#include <vector>

#include "core/log.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"

namespace sluice::net::tls {

namespace ssl = boost::asio::ssl;

namespace {

// ALPN: HTTP/2 only. A client that offers ALPN without h2 is refused; one that offers no ALPN is served.
int select_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
              void*) {
  static const unsigned char h2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, h2, sizeof h2, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

void require_client_certificates(ssl::context& ctx, const certificate_options& o) {
  boost::system::error_code ec;
  ctx.load_verify_file(o.client_ca_file, ec);
  if (ec) {
    throw std::runtime_error(
        core::cat(o.client_ca_setting, ": cannot use '", o.client_ca_file, "': ", ec.message()));
  }
  ctx.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx.native_handle());
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_CLIENT);  // extended key usage clientAuth
  if (!o.client_san.empty()) {
    // The peer's certificate must name it as a DNS SAN (as upstream's VerifyOptions.DNSName).
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    X509_VERIFY_PARAM_set1_host(param, o.client_san.c_str(), o.client_san.size());
  }
}

std::shared_ptr<ssl::context> load(const certificate_options& o) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(o.cert_file, ec);
  if (ec)
    throw std::runtime_error(core::cat(o.cert_setting, ": cannot use '", o.cert_file, "': ", ec.message()));
  ctx->use_private_key_file(o.key_file, ssl::context::pem, ec);
  if (ec)
    throw std::runtime_error(core::cat(o.key_setting, ": cannot use '", o.key_file, "': ", ec.message()));
  if (!o.client_ca_file.empty()) require_client_certificates(*ctx, o);
  if (o.alpn_h2) SSL_CTX_set_alpn_select_cb(ctx->native_handle(), select_h2, nullptr);
  return ctx;
}

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// What the three files hold now (a file that cannot be read counts as its error): a change in the directory
// that leaves them as they were (another file, a log file written there) reloads and logs nothing.
std::string read_all(const certificate_options& o) {
  std::string all;
  for (const auto* file : {&o.cert_file, &o.key_file, &o.client_ca_file}) {
    if (file->empty()) continue;
    auto data = core::read_file(*file);
    const std::string& part = data ? *data : data.error();
    all += core::cat(data ? "ok " : "error ", part.size(), "\n", part);
  }
  return all;
}

}  // namespace

server_certificate::server_certificate(certificate_options options)
    : options_(std::move(options)), context_(load(options_)), last_read_(read_all(options_)) {}

server_certificate::~server_certificate() {
  stop();
}

void server_certificate::watch(boost::asio::any_io_executor ex) {
  std::vector<core::file_watch::target> targets;
  for (const auto* file : {&options_.cert_file, &options_.key_file, &options_.client_ca_file}) {
    if (file->empty()) continue;
    auto dir = parent_directory(*file);
    bool seen = false;
    for (const auto& t : targets) seen = seen || t.directory == dir;
    if (!seen) targets.push_back({dir, std::nullopt});
  }
  watch_ = std::make_unique<core::file_watch>(std::move(ex), std::move(targets),
                                              std::chrono::milliseconds(100), [this] { reload(); });
  watch_->start();
}

void server_certificate::stop() {
  if (watch_) watch_->stop();
}

void server_certificate::reload() {
  auto now = read_all(options_);
  if (now == last_read_) return;  // unchanged since the last load or the last logged failure
  last_read_ = std::move(now);
  try {
    std::atomic_store(&context_, load(options_));
    core::log_info("reloaded the ", options_.description, " from ", options_.cert_file);
  } catch (const std::exception& e) {
    core::log_error(e.what(), " (keeping the previous certificate)");
  }
}

}  // namespace sluice::net::tls
