#include "ratelimit/client/explain_cmd.hpp"

#include <google/protobuf/util/json_util.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/strings.hpp"
#include "ratelimit/client/client_cmd.hpp"
#include "ratelimit/client/debug_http.hpp"

namespace sluice::ratelimit::client {

namespace {

constexpr std::string_view usage_head =
    R"(Usage: sluice explain [-debug_addr host:port] [sluice client's flags]
  Asks the debug listener (default localhost:6070) why the request would be limited: each descriptor's rule,
  the walk through the rules, the nearest rules that did not match, the limits and their counters. Nothing is
  counted. The request's flags are sluice client's (-dial_string, -json and the TLS flags are not used):

)";

}  // namespace

int run_explain(std::span<const std::string_view> args) {
  std::string debug_addr = "localhost:6070";
  std::vector<std::string_view> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    const std::string_view bare = a.starts_with("--") ? a.substr(2) : a.starts_with("-") ? a.substr(1) : a;
    if (bare == "debug_addr") {
      if (i + 1 == args.size()) {
        std::cerr << "sluice explain: flag needs an argument: -debug_addr\n";
        return 2;
      }
      debug_addr = std::string(args[++i]);
    } else if (bare.starts_with("debug_addr=")) {
      debug_addr = std::string(bare.substr(11));
    } else {
      rest.push_back(a);
    }
  }
  auto parsed = parse_client_flags(rest);
  if (std::holds_alternative<help_requested>(parsed)) {
    std::cout << usage_head << client_usage;
    return 0;
  }
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    std::cerr << "sluice explain: " << *error << "\n\n" << usage_head << client_usage;
    return 2;
  }
  const auto& o = std::get<client_options>(parsed);
  if (o.domain.empty() || o.descriptors.empty()) {
    std::cerr << "sluice explain: -domain and at least one -descriptors are required\n";
    return 2;
  }
  std::string body;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(build_request(o), &body, options).ok()) {
    std::cerr << "sluice explain: the request cannot be written as JSON\n";
    return 2;
  }
  try {
    const auto reply = call_debug(debug_addr, boost::beast::http::verb::post, "/explain", std::move(body),
                                  {{"Content-Type", "application/json"}}, o.timeout);
    if (reply.status != 200) {
      std::cerr << "sluice explain: " << reply.status << " " << reply.reason << ": " << reply.body << "\n";
      return 2;
    }
    std::cout << reply.body << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sluice explain: " << debug_addr << ": " << e.what() << "\n";
    return 2;
  }
}

}  // namespace sluice::ratelimit::client
