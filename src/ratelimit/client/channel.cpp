#include "ratelimit/client/channel.hpp"

#include <stdexcept>

#include "core/env.hpp"
#include "core/read_file.hpp"
#include "core/strings.hpp"
#include "ratelimit/client/connect_error.hpp"

namespace sluice::ratelimit::client {

namespace {

std::string read_flag_file(std::string_view flag, const std::string& path) {
  auto content = core::read_file(path);
  if (!content) throw std::runtime_error(core::cat("-", flag, ": cannot read ", path, ": ", content.error()));
  return std::move(*content);
}

}  // namespace

std::shared_ptr<grpc::Channel> open_channel(const client_options& o) {
  const std::string target = o.unix_socket.empty() ? o.dial_string : "unix:" + o.unix_socket;
  grpc::ChannelArguments args;
  if (!o.use_tls) return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions ssl;
  if (!o.server_ca_file.empty()) ssl.pem_root_certs = read_flag_file("grpc-server-ca-file", o.server_ca_file);
  if (!o.cert_file.empty()) {
    ssl.pem_cert_chain = read_flag_file("grpc-cert-file", o.cert_file);
    ssl.pem_private_key = read_flag_file("grpc-key-file", o.key_file);
  }
  if (!o.server_name.empty()) args.SetSslTargetNameOverride(o.server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

core::problem connect_failure(const grpc::Status& status, grpc::Channel& channel, const client_options& o) {
  if (channel.GetState(false) == GRPC_CHANNEL_READY) return std::nullopt;
  const std::string address = o.unix_socket.empty() ? o.dial_string : "unix:" + o.unix_socket;
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE)
    return cannot_connect(address, grpc_reason(status.error_message()));
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    return cannot_connect(address, core::cat("no answer within ", core::format_go_duration(o.timeout)));
  return std::nullopt;
}

}  // namespace sluice::ratelimit::client
