#include "core/tls_client.hpp"

#include <boost/asio/ip/address.hpp>
#include <filesystem>
#include <stdexcept>

#include "core/strings.hpp"

namespace sluice::core {

tls_client_config read_tls_client_files(const env_reader& env, const tls_client_settings& names,
                                        bool enabled) {
  tls_client_config tls;
  tls.enabled = enabled;
  tls.ca_file = env.get_string(names.ca_file);
  tls.cert_file = env.get_string(names.cert_file);
  tls.key_file = env.get_string(names.key_file);
  tls.skip_hostname_verification = env.get_bool(names.skip_hostname_verification);
  if (!enabled) return tls;
  if (tls.cert_file.empty() != tls.key_file.empty())
    throw settings_error(cat(names.cert_file.name, " and ", names.key_file.name, " must be set together"));
  for (auto [s, file] : {std::pair{&names.ca_file, &tls.ca_file},
                         {&names.cert_file, &tls.cert_file},
                         {&names.key_file, &tls.key_file}}) {
    if (!file->empty() && !std::filesystem::is_regular_file(*file))
      throw settings_error(cat("invalid value '", *file, "' for ", s->name, ": no such file"));
  }
  return tls;
}

namespace asio = boost::asio;

std::shared_ptr<asio::ssl::context> make_tls_client_context(const tls_client_config& tls,
                                                            const tls_client_setting_names& names) {
  if (!tls.enabled) return nullptr;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  auto load = [](std::string_view what, const std::string& file, auto&& action) {
    boost::system::error_code ec;
    action(ec);
    if (ec) throw std::runtime_error(cat("invalid file '", file, "' for ", what, ": ", ec.message()));
  };
  if (tls.ca_file.empty()) {
    ctx->set_default_verify_paths();
  } else {
    load(names.ca_file, tls.ca_file, [&](auto& ec) { ctx->load_verify_file(tls.ca_file, ec); });
  }
  if (!tls.cert_file.empty() || !tls.key_file.empty()) {
    load(names.cert_file, tls.cert_file,
         [&](auto& ec) { ctx->use_certificate_chain_file(tls.cert_file, ec); });
    load(names.key_file, tls.key_file,
         [&](auto& ec) { ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec); });
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  return ctx;
}

std::string host_of(const std::string& address) {
  auto host = address.substr(0, address.rfind(':'));
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

bool is_ip_address(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace sluice::core
