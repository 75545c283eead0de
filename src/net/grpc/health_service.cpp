#include "net/grpc/health_service.hpp"

#include <algorithm>

#include "health.pb.h"
#include "net/grpc/call.hpp"

namespace sluice::net::grpc {

namespace {

using response = ::grpc::health::v1::HealthCheckResponse;

bool parse_request(call& c, std::string& service) {
  ::grpc::health::v1::HealthCheckRequest req;
  if (!req.ParseFromArray(c.request().data(), static_cast<int>(c.request().size()))) {
    c.finish(status_code::internal, "grpc: error unmarshalling request");
    return false;
  }
  service = req.service();
  return true;
}

}  // namespace

health_service::health_service(std::string service_name, std::function<bool()> healthy,
                               std::function<void()> on_check)
    : service_name_(std::move(service_name)), healthy_(std::move(healthy)), on_check_(std::move(on_check)) {}

void health_service::add_to(method_table& methods) {
  methods.add("/grpc.health.v1.Health/Check", [this](const std::shared_ptr<call>& c) { check(c); });
  methods.add(
      "/grpc.health.v1.Health/Watch", [this](const std::shared_ptr<call>& c) { watch(c); },
      method_kind::server_streaming);
}

int health_service::status_of(const std::string& name) const {
  if (name.empty()) return response::SERVING;
  if (name == service_name_) return healthy_() ? response::SERVING : response::NOT_SERVING;
  return -1;
}

void health_service::check(const std::shared_ptr<call>& c) {
  if (on_check_) on_check_();
  std::string name;
  if (!parse_request(*c, name)) return;
  const int status = status_of(name);
  if (status < 0) return c->finish(status_code::not_found, "unknown service");
  response r;
  r.set_status(static_cast<response::ServingStatus>(status));
  c->reply(r);
}

void health_service::watch(const std::shared_ptr<call>& c) {
  std::string name;
  if (!parse_request(*c, name)) return;
  int status = status_of(name);
  if (status < 0) status = response::SERVICE_UNKNOWN;
  response r;
  r.set_status(static_cast<response::ServingStatus>(status));
  c->write(r);
  sweep();  // so clients that come and go leave nothing behind
  watchers_.push_back({c, std::move(name), status});
}

void health_service::sweep() {
  std::erase_if(watchers_, [](const watcher& w) {
    auto c = w.stream.lock();
    return !c || c->done();
  });
}

void health_service::notify() {
  sweep();
  for (auto& w : watchers_) {
    const int status = status_of(w.service);
    if (status < 0 || status == w.last_sent) continue;
    w.last_sent = status;
    response r;
    r.set_status(static_cast<response::ServingStatus>(status));
    w.stream.lock()->write(r);
  }
}

}  // namespace sluice::net::grpc
