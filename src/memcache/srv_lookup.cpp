#include "memcache/srv_lookup.hpp"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/strings.hpp"

namespace sluice::memcache {

namespace {

using result_type = boost::system::result<std::vector<std::string>, std::string>;

bool parse_server(const std::string& text, sockaddr_in& out) {
  std::string host = text;
  std::uint16_t port = 53;
  if (auto colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    auto digits = std::string_view(text).substr(colon + 1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc{} || ptr != digits.data() + digits.size() || port == 0) return false;
  }
  std::memset(&out, 0, sizeof out);
  out.sin_family = AF_INET;
  out.sin_port = htons(port);
  return inet_pton(AF_INET, host.c_str(), &out.sin_addr) == 1;
}

}  // namespace

bool valid_dns_server(const std::string& address) {
  sockaddr_in ignored{};
  return parse_server(address, ignored);
}

result_type parse_srv_answer(const std::string& name, std::span<const unsigned char> answer) {
  ns_msg message;
  if (answer.size() > NS_MAXMSG ||
      ns_initparse(answer.data(), static_cast<int>(answer.size()), &message) != 0)
    return core::cat("SRV lookup of ", name, ": a malformed answer");
  std::vector<std::string> targets;
  for (int i = 0; i < ns_msg_count(message, ns_s_an); ++i) {
    ns_rr record;
    if (ns_parserr(&message, ns_s_an, i, &record) != 0 || ns_rr_type(record) != ns_t_srv) continue;
    // priority (2 bytes), weight (2), port (2), then the target's name.
    if (ns_rr_rdlen(record) < 7) continue;
    const unsigned char* data = ns_rr_rdata(record);
    const unsigned port = (static_cast<unsigned>(data[4]) << 8) | data[5];
    char target[NS_MAXDNAME];
    if (dn_expand(ns_msg_base(message), ns_msg_end(message), data + 6, target, sizeof target) < 0) continue;
    std::string fqdn = target;
    if (fqdn.empty() || fqdn.back() != '.') fqdn += '.';
    targets.push_back(core::cat(fqdn, ":", port));
  }
  if (targets.empty()) return core::cat("SRV lookup of ", name, ": no targets");
  std::sort(targets.begin(), targets.end());
  return targets;
}

result_type lookup_srv(const std::string& name, const std::string& dns_server) {
  struct __res_state state;
  std::memset(&state, 0, sizeof state);
  if (res_ninit(&state) != 0) return core::cat("cannot initialise the DNS resolver to look up ", name);
  struct closer {
    res_state s;
    ~closer() { res_nclose(s); }
  } close_state{&state};
  // Bounded: the control thread waits for the answer.
  state.retrans = 2;
  state.retry = 2;
  if (!dns_server.empty()) {
    sockaddr_in server{};
    if (!parse_server(dns_server, server)) return core::cat("invalid DNS server '", dns_server, "'");
    state.nsaddr_list[0] = server;
    state.nscount = 1;
  }
  unsigned char answer[NS_MAXMSG];
  const int length = res_nquery(&state, name.c_str(), ns_c_in, ns_t_srv, answer, sizeof answer);
  if (length < 0) {
    const char* why = state.res_h_errno == HOST_NOT_FOUND ? "no such name"
                      : state.res_h_errno == NO_DATA      ? "no SRV record"
                      : state.res_h_errno == TRY_AGAIN    ? "no answer from the DNS server"
                                                          : "the lookup failed";
    return core::cat("SRV lookup of ", name, ": ", why);
  }
  return parse_srv_answer(name, std::span<const unsigned char>(answer, static_cast<std::size_t>(length)));
}

}  // namespace sluice::memcache
