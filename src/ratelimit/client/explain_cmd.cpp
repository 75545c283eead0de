#include "ratelimit/client/explain_cmd.hpp"

#include <google/protobuf/util/json_util.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/problem.hpp"
#include "core/strings.hpp"
#include "ratelimit/client/client_cmd.hpp"
#include "ratelimit/client/client_flags.hpp"
#include "ratelimit/client/debug_http.hpp"

namespace sluice::ratelimit::client {

namespace {

constexpr std::string_view usage = R"(Usage: sluice explain [flags]
Asks the debug listener why the request would be limited: each descriptor's rule, the walk through the
rules, the nearest rules that did not match, the limits and their counters. Nothing is counted.
Exit status: 0 with the answer's JSON on stdout, 2 on any error.

  -debug_addr host:port    the debug listener (default localhost:6070)
  -domain name             the rate limit domain
  -descriptors k=v[,k=v]   one descriptor (as sluice client's); repeat the flag for more
  -entry key=value         one more entry of the last -descriptors (or of the first descriptor), split at the
                           first '=', the value taken verbatim (a value such as "a,b" or "=")
  -hits_addend n           hits the request would add (default 1)
  -negative_hits           the request gives hits back
  -timeout duration        deadline of the call (default 5s)
sluice client's -dial_string, -unix, -json and TLS flags are refused: explain asks the debug listener
(-debug_addr), over HTTP.
)";

struct explain_options : client_options {
  std::string debug_addr = "localhost:6070";
};

core::problem parse_descriptors(std::string_view value, explain_options& o) {
  return parse_key_values(value, o.descriptors.emplace_back());
}

core::problem parse_entry(std::string_view value, explain_options& o) {
  const auto eq = value.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return core::cat("invalid value '", value, "' for -entry: expected key=value (a key, then the value)");
  if (o.descriptors.empty()) o.descriptors.emplace_back();
  o.descriptors.back().emplace_back(std::string(value.substr(0, eq)), std::string(value.substr(eq + 1)));
  return std::nullopt;
}

constexpr std::string_view grpc_only =
    "is sluice client's: sluice explain asks the debug listener over HTTP (give -debug_addr host:port)";

const flag_spec<explain_options> specs[] = {
    {"debug_addr", &explain_options::debug_addr},
    {"domain", &explain_options::domain},
    {"descriptors", nullptr, nullptr, parse_descriptors},
    {"entry", nullptr, nullptr, parse_entry},
    {"hits_addend", nullptr, nullptr,
     [](std::string_view v, explain_options& o) { return parse_hits_addend(v, o.hits_addend); }},
    {"negative_hits", nullptr, &explain_options::negative_hits},
    {"timeout", nullptr, nullptr,
     [](std::string_view v, explain_options& o) {
       return parse_positive_duration("timeout", v, "500ms or 2s", o.timeout);
     }},
    {.name = "dial_string", .refused = grpc_only},
    {.name = "unix", .refused = grpc_only},
    {.name = "json", .refused = "is sluice client's: sluice explain always prints the answer as JSON"},
    {.name = "grpc-use-tls", .refused = grpc_only},
    {.name = "grpc-server-ca-file", .refused = grpc_only},
    {.name = "grpc-cert-file", .refused = grpc_only},
    {.name = "grpc-key-file", .refused = grpc_only},
    {.name = "grpc-server-name", .refused = grpc_only},
    {.name = "oltp-protocol", .refused = grpc_only}};

int fail(std::string_view message) {
  std::cerr << "sluice explain: " << message << "\n";
  return 2;
}

}  // namespace

int run_explain(std::span<const std::string_view> args) {
  explain_options o;
  if (auto stop = parse_flags(args, std::span<const flag_spec<explain_options>>(specs), o)) {
    if (std::holds_alternative<help_requested>(*stop)) {
      std::cout << usage;
      return 0;
    }
    std::cerr << "sluice explain: " << std::get<std::string>(*stop) << "\n\n" << usage;
    return 2;
  }
  if (o.domain.empty() || o.descriptors.empty())
    return fail("-domain and at least one -descriptors are required (or -entry)");
  std::string body;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(build_request(o), &body, options).ok())
    return fail("the request cannot be written as JSON");
  return run_debug_call("explain", o.debug_addr, boost::beast::http::verb::post, "/explain", std::move(body),
                        {{"Content-Type", "application/json"}}, o.timeout);
}

}  // namespace sluice::ratelimit::client
