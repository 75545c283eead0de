#include "ratelimit/backends/memcache/settings.hpp"

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"
#include "memcache/srv_lookup.hpp"

namespace sluice::ratelimit::backends::memcache {

namespace {

// "host:port" with a non-empty host and a port number.
bool is_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
  return std::ranges::all_of(text.substr(colon + 1), [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

memcache_settings read_memcache_settings(const core::env_reader& env, bool count_only_admitted) {
  if (count_only_admitted) {
    throw core::settings_error(
        "COUNT_ONLY_ADMITTED=true is not offered with BACKEND_TYPE=memcache: memcached cannot check and "
        "change several counters in one step (use redis or memory)");
  }
  memcache_settings m;
  const auto host_port = env.get_string("MEMCACHE_HOST_PORT", "");
  m.host_port = core::split_list(host_port);
  m.srv = env.get_string("MEMCACHE_SRV", "");
  if (!m.srv.empty() && !m.host_port.empty()) {
    throw core::settings_error("Both MEMCACHE_HOST_PORT and MEMCACHE_SRV are set");
  }
  if (m.srv.empty() && m.host_port.empty()) {
    throw core::settings_error(
        "BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT (host:port,...) or MEMCACHE_SRV (an SRV record "
        "name)");
  }
  for (const auto& node : m.host_port) {
    if (!is_host_port(node)) {
      throw core::settings_error(
          core::cat("invalid value '", host_port, "' for MEMCACHE_HOST_PORT: '", node, "' is not host:port"));
    }
  }
  m.srv_refresh = core::to_ms(env.get_duration("MEMCACHE_SRV_REFRESH", std::chrono::nanoseconds{0}));
  m.srv_dns_server = env.get_string("MEMCACHE_SRV_DNS_SERVER", "");
  if (!m.srv_dns_server.empty() && !sluice::memcache::valid_dns_server(m.srv_dns_server)) {
    throw core::settings_error(
        core::cat("invalid value '", m.srv_dns_server,
                  "' for MEMCACHE_SRV_DNS_SERVER: expected an IPv4 address, with a port or not"));
  }
  // gomemcache takes 0 for its default, 2.
  m.max_idle_conns = env.get_uint("MEMCACHE_MAX_IDLE_CONNS", 2, 0, 1024);
  if (m.max_idle_conns == 0) m.max_idle_conns = 2;
  m.tls = core::read_tls_client_files(env, "MEMCACHE_TLS_", env.get_bool("MEMCACHE_TLS", false));
  return m;
}

}  // namespace sluice::ratelimit::backends::memcache
