#include "net/http/host_check.hpp"

#include <boost/asio/ip/address.hpp>

#include "core/strings.hpp"

namespace sluice::net::http {

host_check::host_check(std::vector<std::string> allowed) {
  for (auto& name : allowed) {
    if (name == "*") any_ = true;
    allowed_.push_back(core::ascii_lower(name));
  }
}

core::problem host_check::refuse(std::string_view host) const {
  if (host.empty() || any_) return std::nullopt;
  auto [name, port] = core::split_host_port(host);
  boost::system::error_code ec;
  boost::asio::ip::make_address(name, ec);
  if (!ec) return std::nullopt;
  std::string lower = core::ascii_lower(name);
  if (!lower.empty() && lower.back() == '.') lower.pop_back();  // a fully qualified "localhost."
  if (lower == "localhost") return std::nullopt;
  for (const auto& a : allowed_)
    if (a == lower) return std::nullopt;
  return core::cat("Host '", host.substr(0, 100),
                   "' is not accepted by the debug listener (DNS rebinding protection): use an IP address or "
                   "localhost, or add the name to DEBUG_ALLOWED_HOSTS");
}

}  // namespace sluice::net::http
