#include "net/grpc/grpc_server.hpp"

#include <absl/synchronization/mutex.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/health_check_service_interface.h>

#include <stdexcept>

#include "core/strings.hpp"

namespace sluice::net::grpc {

using namespace std::chrono_literals;

server::server(server_options options) : options_(std::move(options)) {}

server::~server() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

void server::add_service(::grpc::Service* service) {
  services_.push_back(service);
}

std::string server::address() const {
  if (!options_.unix_socket.empty()) return "unix:" + options_.unix_socket;
  return core::host_port(options_.host, bound_port_);
}

void server::start() {
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex lock inside gRPC also maintains a
  // lock-order graph for deadlock detection: a measurable share of each call's cost. gRPC is not ours to
  // debug here.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ::grpc::EnableDefaultHealthCheckService(true);
  ::grpc::ServerBuilder builder;
  std::string listen;
  if (!options_.unix_socket.empty()) {
    listen = "unix:" + options_.unix_socket;
  } else {
    listen = core::host_port(options_.host, options_.port);
  }
  builder.AddListeningPort(listen, ::grpc::InsecureServerCredentials(), &bound_port_);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             static_cast<int>(options_.max_connection_age.count()));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             static_cast<int>(options_.max_connection_age_grace.count()));
  // Without this gRPC may refuse a second server on the same port only after a confusing delay.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (auto* s : services_) builder.RegisterService(s);
  server_ = builder.BuildAndStart();
  if (!server_ || (options_.unix_socket.empty() && bound_port_ == 0)) {
    server_.reset();
    throw std::runtime_error(core::cat("cannot listen for gRPC on ", listen));
  }
  if (!options_.unix_socket.empty()) bound_port_ = 0;
  set_serving(true);
}

void server::set_serving(bool serving) {
  if (!server_) return;
  if (auto* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(options_.health_service_name, serving);
  }
}

void server::shutdown(std::chrono::milliseconds grace) {
  if (!server_) return;
  calls_.start_draining();
  calls_.wait_idle(std::chrono::steady_clock::now() + grace);
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace sluice::net::grpc
