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

constexpr core::setting host_port_setting{
    "MEMCACHE_HOST_PORT", "list", "",
    "the memcached nodes, host:port,host:port,...; a key's node as upstream's client chooses it"};
constexpr core::setting srv{"MEMCACHE_SRV", "text", "",
                            "instead of a list: a DNS SRV name whose targets are the nodes"};
constexpr core::setting srv_refresh{"MEMCACHE_SRV_REFRESH", "duration", "0",
                                    "look the SRV name up again this often; 0: once"};
constexpr core::setting srv_dns_server{
    "MEMCACHE_SRV_DNS_SERVER", "text", "",
    "the DNS server for MEMCACHE_SRV, ip or ip:port; empty: /etc/resolv.conf's"};
constexpr core::setting max_idle_conns{
    "MEMCACHE_MAX_IDLE_CONNS", "whole number", "2",
    "pipelined connections per node, shared out among the workers; 0 means 2"};
constexpr core::setting tls{"MEMCACHE_TLS", "bool", "false", "connect to the nodes with TLS"};
constexpr core::setting tls_ca{"MEMCACHE_TLS_CACERT", "path", "",
                               "CA file that signs the nodes' certificates; empty: the system's CAs"};
constexpr core::setting tls_cert{"MEMCACHE_TLS_CLIENT_CERT", "path", "",
                                 "client certificate for mutual TLS, with MEMCACHE_TLS_CLIENT_KEY"};
constexpr core::setting tls_key{"MEMCACHE_TLS_CLIENT_KEY", "path", "", "the client certificate's key"};
constexpr core::setting tls_skip{"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "bool", "false",
                                 "verify the certificate chain but not the name"};
constexpr core::setting all[]{host_port_setting, srv,     srv_refresh, srv_dns_server,
                              max_idle_conns,    tls,     tls_ca,      tls_cert,
                              tls_key,           tls_skip};

}  // namespace

std::span<const core::setting> memcache_backend_settings() {
  return all;
}

std::string not_offered(std::string_view what) {
  return core::cat(
      what,
      " is not offered with BACKEND_TYPE=memcache (memcached cannot check and change counters in "
      "one step); use redis or memory");
}

core::problem memcache_cannot_count(std::string_view algorithm, bool count_only_admitted) {
  if (count_only_admitted) return not_offered("count_only_admitted");  // (first, as a request's refusal)
  if (algorithm == "gcra" || algorithm == "concurrency")
    return not_offered(core::cat("algorithm ", algorithm));
  return std::nullopt;
}

memcache_settings read_memcache_settings(const core::env_reader& env, bool count_only_admitted) {
  if (count_only_admitted) {
    throw core::settings_error(
        "COUNT_ONLY_ADMITTED=true is not offered with BACKEND_TYPE=memcache: memcached cannot check and "
        "change several counters in one step (use redis or memory)");
  }
  memcache_settings m;
  const auto host_port = env.get_string(host_port_setting);
  m.host_port = core::split_list(host_port);
  m.srv = env.get_string(srv);
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
  m.srv_refresh = core::to_ms(env.get_duration(srv_refresh));
  m.srv_dns_server = env.get_string(srv_dns_server);
  if (!m.srv_dns_server.empty() && !sluice::memcache::valid_dns_server(m.srv_dns_server)) {
    throw core::settings_error(
        core::cat("invalid value '", m.srv_dns_server,
                  "' for MEMCACHE_SRV_DNS_SERVER: expected an IPv4 address, with a port or not"));
  }
  // gomemcache takes 0 for its default, 2.
  m.max_idle_conns = env.get_uint(max_idle_conns, 0, 1024);
  if (m.max_idle_conns == 0) m.max_idle_conns = 2;
  m.tls = core::read_tls_client_files(env, {tls_ca, tls_cert, tls_key, tls_skip}, env.get_bool(tls));
  return m;
}

}  // namespace sluice::ratelimit::backends::memcache
