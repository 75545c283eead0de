#include "ratelimit/client/client_flags.hpp"

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
)";

namespace {

enum class kind { text, boolean };

struct flag_spec {
  std::string_view name;
  kind type;
};

constexpr flag_spec specs[] = {{"dial_string", kind::text},      {"unix", kind::text},
                               {"domain", kind::text},           {"descriptors", kind::text},
                               {"hits_addend", kind::text},      {"negative_hits", kind::boolean},
                               {"timeout", kind::text},          {"json", kind::boolean},
                               {"grpc-use-tls", kind::boolean},  {"grpc-server-ca-file", kind::text},
                               {"grpc-cert-file", kind::text},   {"grpc-key-file", kind::text},
                               {"grpc-server-name", kind::text}, {"oltp-protocol", kind::text}};

// upstream: each pair has exactly one '='; the value may be empty.
std::optional<std::string> parse_descriptor(const std::string_view flag_value, client_options& out) {
  auto& descriptor = out.descriptors.emplace_back();
  std::string_view text = flag_value;
  while (true) {
    const auto comma = text.find(',');
    const auto pair = text.substr(0, comma);
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || pair.find('=', eq + 1) != std::string_view::npos) {
      return core::cat("invalid descriptor list '", flag_value,
                       "': expected key=value pairs separated by commas");
    }
    descriptor.emplace_back(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
    if (comma == std::string_view::npos) return std::nullopt;
    text.remove_prefix(comma + 1);
  }
}

std::optional<std::string> apply(std::string_view name, std::string_view value, client_options& o) {
  if (name == "dial_string") {
    o.dial_string = value;
  } else if (name == "unix") {
    o.unix_socket = value;
  } else if (name == "domain") {
    o.domain = value;
  } else if (name == "descriptors") {
    return parse_descriptor(value, o);
  } else if (name == "hits_addend") {
    std::uint64_t n = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc{} || ptr != value.data() + value.size()) {
      return core::cat("invalid value '", value,
                       "' for -hits_addend: expected an integer from 0 to 18446744073709551615");
    }
    o.hits_addend = n;
  } else if (name == "timeout") {
    auto d = core::parse_go_duration(value);
    if (!d || d->count() <= 0) {
      return core::cat("invalid value '", value,
                       "' for -timeout: expected a positive duration such as 500ms or 2s");
    }
    o.timeout = std::chrono::ceil<std::chrono::milliseconds>(*d);
  } else if (name == "grpc-server-ca-file") {
    o.server_ca_file = value;
  } else if (name == "grpc-cert-file") {
    o.cert_file = value;
  } else if (name == "grpc-key-file") {
    o.key_file = value;
  } else if (name == "grpc-server-name") {
    o.server_name = value;
  } else if (name == "oltp-protocol") {
    if (!value.empty()) o.warnings.push_back("-oltp-protocol is ignored: this client exports no traces");
  }
  return std::nullopt;
}

std::optional<std::string> apply_bool(std::string_view name, bool value, client_options& o) {
  if (name == "negative_hits") o.negative_hits = value;
  if (name == "json") o.json = value;
  if (name == "grpc-use-tls") o.use_tls = value;
  return std::nullopt;
}

}  // namespace

std::variant<client_options, help_requested, std::string> parse_client_flags(
    std::span<const std::string_view> args) {
  client_options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--" && i + 1 == args.size()) break;  // Go's end of flags
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") {
      return core::cat("unexpected argument '", arg, "': every argument is a flag (see -help)");
    }
    arg.remove_prefix(arg.starts_with("--") ? 2 : 1);
    if (arg == "h" || arg == "help") return help_requested{};
    const auto eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    const flag_spec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) return core::cat("flag provided but not defined: -", name);
    if (spec->type == kind::boolean) {
      const auto value =
          eq == std::string_view::npos ? std::optional<bool>(true) : core::parse_go_bool(arg.substr(eq + 1));
      if (!value) return core::cat("invalid boolean value '", arg.substr(eq + 1), "' for -", name);
      if (auto error = apply_bool(name, *value, o)) return *error;
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return core::cat("flag needs an argument: -", name);
    }
    if (auto error = apply(name, value, o)) return *error;
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    return "-grpc-cert-file and -grpc-key-file go together (mutual TLS needs both)";
  }
  if (!o.use_tls && (!o.server_ca_file.empty() || !o.cert_file.empty() || !o.server_name.empty())) {
    return "TLS flags given without -grpc-use-tls";
  }
  return o;
}

}  // namespace sluice::ratelimit::client
