#include "ratelimit/client/rlqs_client_flags.hpp"

#include <charconv>
#include <cmath>

#include "core/env.hpp"
#include "core/problem.hpp"
#include "core/strings.hpp"
#include "ratelimit/client/flag_parser.hpp"

namespace sluice::ratelimit::client {

const std::string_view rlqs_client_usage = R"(Usage: sluice rlqs-client -domain name -bucket k=v[,k=v] [flags]
A small data plane for Rate Limit Quota Service servers (Sluice or any other): opens StreamRateLimitQuotas,
sends simulated requests for each bucket at -rate, enforces what the server assigns as Envoy does, reports
usage every -interval, and prints every action received and every report sent.
Exit status: 0 ran for -duration, 2 error (the server ended the stream with an error, or it cannot be reached).

  -dial_string host:port   the server (default localhost:8081)
  -unix path               dial this Unix socket instead
  -domain name             the quota domain (a rules domain)
  -bucket k=v[,k=v]        one bucket's id; repeat the flag for more
  -rate n                  simulated requests per second for each bucket (default 10; 0: none, only reports)
  -duration d              how long to run (default 30s)
  -interval d              usage report interval (default 5s, as Envoy)
  -json                    print each action and report as one JSON line
  -grpc-use-tls            connect with TLS
  -grpc-server-ca-file f   CA certificates to verify the server with (default: the system's)
  -grpc-cert-file f        client certificate, for mutual TLS (with -grpc-key-file)
  -grpc-key-file f         client private key
  -grpc-server-name name   the name the server certificate must carry (default: the dial host)
)";

namespace {

core::problem parse_bucket(std::string_view value, rlqs_client_options& o) {
  return parse_key_values(value, o.descriptors.emplace_back());
}

core::problem parse_rate(std::string_view value, rlqs_client_options& o) {
  double rate = 0;
  const auto r = std::from_chars(value.data(), value.data() + value.size(), rate);
  if (value.empty() || r.ec != std::errc{} || r.ptr != value.data() + value.size() || !(rate >= 0) ||
      !std::isfinite(rate) || rate > 1e6) {
    return core::cat("invalid value '", value, "' for -rate: expected requests per second from 0 to 1000000");
  }
  o.rate = rate;
  return std::nullopt;
}

const flag_spec<rlqs_client_options> specs[] = {
    {"dial_string", &rlqs_client_options::dial_string},
    {"unix", &rlqs_client_options::unix_socket},
    {"domain", &rlqs_client_options::domain},
    {"bucket", nullptr, nullptr, parse_bucket},
    {"rate", nullptr, nullptr, parse_rate},
    {"duration", nullptr, nullptr,
     [](std::string_view v, rlqs_client_options& o) {
       return parse_positive_duration("duration", v, "10s", o.duration);
     }},
    {"interval", nullptr, nullptr,
     [](std::string_view v, rlqs_client_options& o) {
       return parse_positive_duration("interval", v, "10s", o.interval);
     }},
    {"json", nullptr, &rlqs_client_options::json},
    {"grpc-use-tls", nullptr, &rlqs_client_options::use_tls},
    {"grpc-server-ca-file", &rlqs_client_options::server_ca_file},
    {"grpc-cert-file", &rlqs_client_options::cert_file},
    {"grpc-key-file", &rlqs_client_options::key_file},
    {"grpc-server-name", &rlqs_client_options::server_name}};

}  // namespace

std::variant<rlqs_client_options, help_requested, std::string> parse_rlqs_client_flags(
    std::span<const std::string_view> args) {
  rlqs_client_options o;
  if (auto stop = parse_flags(args, std::span<const flag_spec<rlqs_client_options>>(specs), o)) {
    return stopped<std::variant<rlqs_client_options, help_requested, std::string>>(std::move(*stop));
  }
  if (auto error = tls_flags_error(o)) return *error;
  if (o.domain.empty()) return std::string("-domain is required: the quota domain");
  if (o.descriptors.empty()) return std::string("-bucket is required: at least one bucket (k=v[,k=v])");
  return o;
}

}  // namespace sluice::ratelimit::client
