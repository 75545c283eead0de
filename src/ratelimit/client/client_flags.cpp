#include "ratelimit/client/client_flags.hpp"

#include "core/problem.hpp"
#include "ratelimit/client/flag_parser.hpp"

#include <charconv>
#include <limits>

#include "core/env.hpp"
#include "core/strings.hpp"

namespace sluice::ratelimit::client {

const std::string_view client_usage = R"(Usage: sluice client [flags]
Sends one ShouldRateLimit request to an Envoy rate limit service (Sluice or any other) and prints the answer.
Exit status: 0 OK, 1 OVER_LIMIT, 2 error.

  -dial_string host:port   the server (default localhost:8081)
  -unix path               dial this Unix socket instead
  -domain name             the rate limit domain
  -descriptors k=v[,k=v]   one descriptor; repeat the flag for more
  -hits_addend n           hits the request adds (default 1)
  -negative_hits           give the hits back instead (is_negative_hits on every descriptor)
  -timeout duration        deadline of the call (default 5s)
  -json                    print only the response, as JSON
  -grpc-use-tls            connect with TLS
  -grpc-server-ca-file f   CA certificates to verify the server with (default: the system's)
  -grpc-cert-file f        client certificate, for mutual TLS (with -grpc-key-file)
  -grpc-key-file f         client private key
  -grpc-server-name name   the name the server certificate must carry (default: the dial host)
  -oltp-protocol p         upstream's tracing flag: accepted, ignored with a warning (no traces exported)
)";

namespace {

core::problem parse_descriptor(const std::string_view flag_value, client_options& out) {
  return parse_key_values(flag_value, out.descriptors.emplace_back());
}

core::problem parse_hits(std::string_view value, client_options& o) {
  return parse_hits_addend(value, o.hits_addend);
}

core::problem parse_timeout(std::string_view value, client_options& o) {
  return parse_positive_duration("timeout", value, "500ms or 2s", o.timeout);
}

core::problem ignore_tracing(std::string_view value, client_options& o) {
  if (!value.empty()) o.warnings.push_back("-oltp-protocol is ignored: this client exports no traces");
  o.oltp_protocol = value;
  return std::nullopt;
}

const flag_spec<client_options> specs[] = {{"dial_string", &client_options::dial_string},
                                           {"unix", &client_options::unix_socket},
                                           {"domain", &client_options::domain},
                                           {"descriptors", nullptr, nullptr, parse_descriptor},
                                           {"hits_addend", nullptr, nullptr, parse_hits},
                                           {"negative_hits", nullptr, &client_options::negative_hits},
                                           {"timeout", nullptr, nullptr, parse_timeout},
                                           {"json", nullptr, &client_options::json},
                                           {"grpc-use-tls", nullptr, &client_options::use_tls},
                                           {"grpc-server-ca-file", &client_options::server_ca_file},
                                           {"grpc-cert-file", &client_options::cert_file},
                                           {"grpc-key-file", &client_options::key_file},
                                           {"grpc-server-name", &client_options::server_name},
                                           {"oltp-protocol", nullptr, nullptr, ignore_tracing}};

}  // namespace

core::problem parse_hits_addend(std::string_view value, std::uint64_t& out) {
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (value.empty() || ec != std::errc{} || ptr != value.data() + value.size()) {
    return core::cat("invalid value '", value,
                     "' for -hits_addend: expected an integer from 0 to 18446744073709551615");
  }
  return std::nullopt;
}

core::problem parse_positive_duration(std::string_view flag, std::string_view value, std::string_view example,
                                      std::chrono::nanoseconds& out) {
  auto d = core::parse_go_duration(value);
  if (!d || d->count() <= 0) {
    return core::cat("invalid value '", value, "' for -", flag, ": expected a positive duration such as ",
                     example);
  }
  out = *d;
  return std::nullopt;
}

// upstream: each pair has exactly one '='; the value may be empty.
core::problem parse_key_values(std::string_view flag_value,
                               std::vector<std::pair<std::string, std::string>>& out) {
  std::string_view text = flag_value;
  while (true) {
    const auto comma = text.find(',');
    const auto pair = text.substr(0, comma);
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || pair.find('=', eq + 1) != std::string_view::npos) {
      return core::cat("invalid descriptor list '", flag_value,
                       "': expected key=value pairs separated by commas");
    }
    out.emplace_back(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
    if (comma == std::string_view::npos) return std::nullopt;
    text.remove_prefix(comma + 1);
  }
}

std::variant<client_options, help_requested, std::string> parse_client_flags(
    std::span<const std::string_view> args) {
  client_options o;
  if (auto stop = parse_flags(args, std::span<const flag_spec<client_options>>(specs), o)) {
    return stopped<std::variant<client_options, help_requested, std::string>>(std::move(*stop));
  }
  if (auto error = tls_flags_error(o)) return *error;
  return o;
}

core::problem tls_flags_error(const client_options& o) {
  if (o.cert_file.empty() != o.key_file.empty()) {
    return "-grpc-cert-file and -grpc-key-file go together (mutual TLS needs both)";
  }
  if (!o.use_tls && (!o.server_ca_file.empty() || !o.cert_file.empty() || !o.server_name.empty())) {
    return "TLS flags given without -grpc-use-tls";
  }
  return std::nullopt;
}

}  // namespace sluice::ratelimit::client
