#include "ratelimit/client/client_cmd.hpp"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "core/env.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"
#include "net/grpc/status.hpp"
#include "ratelimit/client/channel.hpp"
#include "ratelimit/client/client_flags.hpp"
#include "rls.grpc.pb.h"

namespace sluice::ratelimit::client {

namespace {

using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;
using envoy::service::ratelimit::v3::RateLimitService;

constexpr int exit_ok = 0;
constexpr int exit_over_limit = 1;
constexpr int exit_error = 2;

}  // namespace

RateLimitRequest build_request(const client_options& o) {
  RateLimitRequest request;
  request.set_domain(o.domain);
  const bool per_descriptor = o.hits_addend == 0 || o.hits_addend > UINT32_MAX;
  if (!per_descriptor) request.set_hits_addend(static_cast<std::uint32_t>(o.hits_addend));
  for (const auto& pairs : o.descriptors) {
    auto* descriptor = request.add_descriptors();
    if (per_descriptor) descriptor->mutable_hits_addend()->set_value(o.hits_addend);
    descriptor->set_is_negative_hits(o.negative_hits);
    for (const auto& [key, value] : pairs) {
      auto* entry = descriptor->add_entries();
      entry->set_key(key);
      entry->set_value(value);
    }
  }
  return request;
}

namespace {

// Go's %q for the printable text a flag value usually holds: quotes and backslashes escaped.
std::string quoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

std::string descriptors_text(const client_options& o) {
  std::string text;
  for (const auto& pairs : o.descriptors) {
    text += "[ ";
    for (const auto& [key, value] : pairs) text += core::cat("<key=", key, ", value=", value, "> ");
    text += "] ";
  }
  return text;
}

// upstream prints every flag, in name order, before calling.
void print_flags(const client_options& o) {
  const auto yes_no = [](bool b) { return std::string(b ? "true" : "false"); };
  const std::pair<std::string_view, std::string> flags[] = {{"descriptors", descriptors_text(o)},
                                                            {"dial_string", o.dial_string},
                                                            {"domain", o.domain},
                                                            {"grpc-cert-file", o.cert_file},
                                                            {"grpc-key-file", o.key_file},
                                                            {"grpc-server-ca-file", o.server_ca_file},
                                                            {"grpc-server-name", o.server_name},
                                                            {"grpc-use-tls", yes_no(o.use_tls)},
                                                            {"hits_addend", core::cat(o.hits_addend)},
                                                            {"json", yes_no(o.json)},
                                                            {"negative_hits", yes_no(o.negative_hits)},
                                                            {"oltp-protocol", o.oltp_protocol},
                                                            {"timeout", core::format_go_duration(o.timeout)},
                                                            {"unix", o.unix_socket}};
  for (const auto& [name, value] : flags) std::cout << "Flag: --" << name << "=" << quoted(value) << "\n";
}

}  // namespace

int run_client(std::span<const std::string_view> args) {
  auto parsed = parse_client_flags(args);
  if (std::holds_alternative<help_requested>(parsed)) {
    std::cout << client_usage;
    return exit_ok;
  }
  if (const auto* error = std::get_if<std::string>(&parsed)) {
    std::cerr << "sluice client: " << *error << "\n\n" << client_usage;
    return exit_error;
  }
  const auto& o = std::get<client_options>(parsed);
  for (const auto& warning : o.warnings) std::cerr << "sluice client: " << warning << "\n";
  try {
    if (!o.json) print_flags(o);
    const auto channel = open_channel(o);
    auto stub = RateLimitService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + o.timeout);
    RateLimitResponse response;
    const auto status = stub->ShouldRateLimit(&context, build_request(o), &response);
    if (!status.ok()) {
      if (auto failure = connect_failure(status, *channel, o)) {
        std::cerr << "sluice client: " << *failure << "\n";
        return exit_error;
      }
      std::cerr << "request error: " << net::grpc::status_name(status.error_code()) << ": "
                << status.error_message() << "\n";
      return exit_error;
    }
    if (o.json) {
      std::string json;
      google::protobuf::util::JsonPrintOptions options;
      (void)google::protobuf::util::MessageToJsonString(response, &json, options);
      std::cout << json << std::endl;
    } else {
      std::string text;
      google::protobuf::TextFormat::Printer printer;
      printer.SetSingleLineMode(true);
      printer.PrintToString(response, &text);
      std::cout << "response: " << text << std::endl;
    }
    return response.overall_code() == RateLimitResponse::OVER_LIMIT ? exit_over_limit : exit_ok;
  } catch (const std::exception& e) {
    std::cerr << "sluice client: " << e.what() << "\n";
    return exit_error;
  }
}

}  // namespace sluice::ratelimit::client
