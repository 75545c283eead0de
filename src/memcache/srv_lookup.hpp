#pragma once
// MEMCACHE_SRV: the memcached nodes named by a DNS SRV record, as upstream lists them — each target as
// "target:port" (the target fully qualified, with its final dot, as Go's net.LookupSRV gives it), sorted, so
// every instance that sees the same record orders the nodes, and so the keys, the same way. Blocking: for
// the control thread only.

#include <boost/system/result.hpp>
#include <span>
#include <string>
#include <vector>

namespace sluice::memcache {

// `dns_server` ("ip" or "ip:port", IPv4) replaces the resolvers of /etc/resolv.conf when not empty.
// Fails with a message naming the record when the lookup fails or finds no target.
boost::system::result<std::vector<std::string>, std::string> lookup_srv(const std::string& name,
                                                                        const std::string& dns_server);

// Whether `address` is what lookup_srv takes as `dns_server`.
bool valid_dns_server(const std::string& address);

// The targets of a DNS answer to an SRV query for `name` (the wire format), sorted; fails on a malformed
// answer or one without targets. Separate from the lookup so that it can be fuzzed.
boost::system::result<std::vector<std::string>, std::string> parse_srv_answer(
    const std::string& name, std::span<const unsigned char> answer);

}  // namespace sluice::memcache
