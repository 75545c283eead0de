#include "ratelimit/xds/client.hpp"

#include <grpcpp/grpcpp.h>

#include <boost/asio/post.hpp>
#include <utility>

#include "core/log.hpp"
#include "core/strings.hpp"
#include "discovery.grpc.pb.h"
#include "net/grpc/status.hpp"

namespace sluice::ratelimit::xds {

namespace {

using ads = envoy::service::discovery::v3::AggregatedDiscoveryService;

std::shared_ptr<grpc::Channel> make_channel(const client_settings& s) {
  grpc::ChannelArguments args;
  if (s.max_receive_bytes > 0) args.SetMaxReceiveMessageSize(static_cast<int>(s.max_receive_bytes));
  if (!s.server_san.empty()) args.SetSslTargetNameOverride(s.server_san);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (s.use_tls) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = s.ca_pem;  // empty: gRPC's default roots
    tls.pem_cert_chain = s.client_cert_pem;
    tls.pem_private_key = s.client_key_pem;
    credentials = grpc::SslCredentials(tls);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(s.server_url, credentials, args);
}

}  // namespace

client::client(client_settings settings, boost::asio::any_io_executor control, rules_target target)
    : settings_(std::move(settings)),
      control_(std::move(control)),
      target_(std::move(target)),
      session_(settings_.node) {}

client::~client() {
  stop();
}

void client::start() {
  thread_ = std::thread([this] { run(); });
}

void client::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (context_) context_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void client::ask_again() {
  core::log_info("Asking the xDS Management Server at ", settings_.server_url, " for its rules again");
  {
    std::lock_guard lock(mutex_);
    again_ = true;
    if (context_) context_->TryCancel();
  }
  wake_.notify_all();
}

void client::run() {
  backoff wait(settings_.backoff);
  for (;;) {
    if (run_stream()) wait.reset();
    std::unique_lock lock(mutex_);
    if (stopping_) return;
    if (std::exchange(again_, false)) continue;
    const auto delay = wait.next();
    core::log_info("Reconnecting to the xDS Management Server at ", settings_.server_url, " in ",
                   delay.count(), " ms");
    if (wake_.wait_for(lock, delay, [this] { return stopping_ || again_; }) && stopping_) return;
  }
}

bool client::run_stream() {
  grpc::ClientContext context;
  for (const auto& [name, value] : settings_.headers) context.AddMetadata(name, value);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    context_ = &context;
    again_ = false;  // this stream is the one asked for
  }
  auto stub = ads::NewStub(make_channel(settings_));
  auto stream = stub->StreamAggregatedResources(&context);
  bool received = false;
  if (stream->Write(session_.opening_request())) {
    sotw_session::response response;
    while (stream->Read(&response)) {
      received = true;
      std::vector<config::config_file> files;
      std::string error;
      std::optional<std::optional<std::string>> verdict;
      // The work owns what it reads: after a stop this thread no longer waits for it.
      if (sotw_session::decode(response, files, error)) {
        verdict = on_control(
            [this, files = std::move(files)]() mutable { return target_.apply(std::move(files)); });
      } else {
        verdict = on_control([this, error] {
          target_.refuse(error);
          return std::optional<std::string>(error);
        });
      }
      if (!verdict) break;  // stopping
      const auto answer = *verdict ? session_.reject(response, **verdict) : session_.accept(response);
      if (!stream->Write(answer)) break;
    }
  }
  stream->WritesDone();
  const auto status = stream->Finish();
  {
    std::lock_guard lock(mutex_);
    context_ = nullptr;
    if (stopping_ || (again_ && status.error_code() == grpc::StatusCode::CANCELLED)) return received;
  }
  if (status.ok()) {
    core::log_error(
        "Failed to receive configuration from xDS Management Server: the server ended the stream");
  } else {
    core::log_error("Failed to receive configuration from xDS Management Server: rpc error: code = ",
                    net::grpc::status_name(status.error_code()), " desc = ", status.error_message());
  }
  return received;
}

std::optional<std::optional<std::string>> client::on_control(
    std::function<std::optional<std::string>()> work) {
  // Shared with the handler, which may run after this thread stopped waiting (a stop).
  struct state {
    std::optional<std::string> error;
    bool done = false;
  };
  auto shared = std::make_shared<state>();
  boost::asio::post(control_, [this, shared, work = std::move(work)] {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    auto error = work();
    {
      std::lock_guard lock(mutex_);
      shared->error = std::move(error);
      shared->done = true;
    }
    wake_.notify_all();
  });
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return shared->done || stopping_; });
  if (!shared->done) return std::nullopt;
  return shared->error;
}

}  // namespace sluice::ratelimit::xds
