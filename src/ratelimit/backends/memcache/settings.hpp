#pragma once
// BACKEND_TYPE=memcache: its settings (MEMCACHE_*), read once from the environment with upstream's names and
// defaults. Anything invalid throws core::settings_error naming the variable.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/env.hpp"
#include "core/problem.hpp"
#include "core/tls_client.hpp"

namespace sluice::ratelimit::backends::memcache {

struct memcache_settings {
  std::vector<std::string> host_port;        // MEMCACHE_HOST_PORT, in order
  std::string srv;                           // MEMCACHE_SRV: the nodes are its targets
  std::chrono::milliseconds srv_refresh{0};  // MEMCACHE_SRV_REFRESH: 0 = resolve once
  std::string srv_dns_server;                // MEMCACHE_SRV_DNS_SERVER: "" = /etc/resolv.conf
  std::size_t max_idle_conns = 2;            // MEMCACHE_MAX_IDLE_CONNS: connections per node
  core::tls_client_config tls;               // MEMCACHE_TLS*
};

// `count_only_admitted`: COUNT_ONLY_ADMITTED, which memcached cannot offer.
memcache_settings read_memcache_settings(const core::env_reader& env, bool count_only_admitted);
// Their declarations (core/setting.hpp).
std::span<const core::setting> memcache_backend_settings();

// "<what> is not offered with BACKEND_TYPE=memcache (memcached cannot check and change counters in one
// step); use redis or memory": memcached has no scripts and no multi-key transactions.
std::string not_offered(std::string_view what);
// A rule memcached cannot count: `gcra` and `concurrency` (an arrival time, a lease table) or
// `count_only_admitted` (several counters checked before any is changed): why. Such rules load, with this
// as a warning, and their requests are answered UNAVAILABLE with it.
core::problem memcache_cannot_count(std::string_view algorithm, bool count_only_admitted);

}  // namespace sluice::ratelimit::backends::memcache
