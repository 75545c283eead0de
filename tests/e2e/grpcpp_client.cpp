// A gRPC C++ (grpc++) client against Sluice, for tests/e2e/test_grpcpp.py: the client library nearest to
// Envoy's own. Prints one line per check, "name: result", and exits 0 when every call returned; the test
// judges the results.
//
//   grpcpp_client ADDRESS SEQUENTIAL CONCURRENT
// ADDRESS: host:port or unix:/path. SEQUENTIAL calls one after another on key "seq", then CONCURRENT calls at
// once through one completion queue on key "par", then a health check and an unknown method.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>

#include "health.grpc.pb.h"
#include "rls.grpc.pb.h"

namespace {

using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;
using envoy::service::ratelimit::v3::RateLimitService;

RateLimitRequest request_for(const std::string& value) {
  RateLimitRequest r;
  r.set_domain("cpp");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key("k");
  e->set_value(value);
  return r;
}

void deadline(grpc::ClientContext& ctx, int ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: grpcpp_client ADDRESS SEQUENTIAL CONCURRENT\n";
    return 2;
  }
  const int sequential = std::atoi(argv[2]);
  const int concurrent = std::atoi(argv[3]);
  auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  auto stub = RateLimitService::NewStub(channel);

  int ok = 0, over = 0, failed = 0;
  for (int i = 0; i < sequential; ++i) {
    grpc::ClientContext ctx;
    deadline(ctx, 5000);
    RateLimitResponse resp;
    auto status = stub->ShouldRateLimit(&ctx, request_for("seq"), &resp);
    if (!status.ok()) {
      ++failed;
      std::cout << "sequential error: " << status.error_code() << " " << status.error_message() << "\n";
    } else if (resp.overall_code() == RateLimitResponse::OVER_LIMIT) {
      ++over;
    } else {
      ++ok;
    }
  }
  std::cout << "sequential: ok=" << ok << " over=" << over << " failed=" << failed << "\n";

  // Envoy's pattern: many calls in flight on one channel, completions from a queue.
  grpc::CompletionQueue cq;
  struct pending {
    grpc::ClientContext ctx;
    RateLimitResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<RateLimitResponse>> reader;
  };
  std::vector<std::unique_ptr<pending>> calls;
  for (int i = 0; i < concurrent; ++i) {
    auto p = std::make_unique<pending>();
    deadline(p->ctx, 10000);
    p->reader = stub->AsyncShouldRateLimit(&p->ctx, request_for("par"), &cq);
    p->reader->Finish(&p->resp, &p->status, p.get());
    calls.push_back(std::move(p));
  }
  int done = 0, par_ok = 0, par_failed = 0;
  void* tag = nullptr;
  bool good = false;
  while (done < concurrent && cq.Next(&tag, &good)) {
    auto* p = static_cast<pending*>(tag);
    ++done;
    if (p->status.ok() && p->resp.overall_code() == RateLimitResponse::OK) {
      ++par_ok;
    } else {
      ++par_failed;
    }
  }
  std::cout << "concurrent: ok=" << par_ok << " failed=" << par_failed << "\n";

  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext hctx;
  deadline(hctx, 5000);
  grpc::health::v1::HealthCheckRequest hreq;
  hreq.set_service("ratelimit");
  grpc::health::v1::HealthCheckResponse hresp;
  auto hstatus = health->Check(&hctx, hreq, &hresp);
  std::cout << "health: "
            << (hstatus.ok() ? grpc::health::v1::HealthCheckResponse::ServingStatus_Name(hresp.status())
                             : "error " + std::to_string(hstatus.error_code()))
            << "\n";

  grpc::GenericStub generic(channel);
  grpc::ClientContext gctx;
  deadline(gctx, 5000);
  grpc::ByteBuffer out;
  grpc::Status gstatus;
  bool finished = false;
  std::mutex m;
  std::condition_variable cv;
  const auto bytes = request_for("x").SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer in(&slice, 1);
  generic.UnaryCall(&gctx, "/envoy.service.ratelimit.v3.RateLimitService/Nope", grpc::StubOptions(), &in,
                    &out, [&](grpc::Status s) {
                      std::lock_guard lock(m);
                      gstatus = std::move(s);
                      finished = true;
                      cv.notify_one();
                    });
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return finished; });
  std::cout << "unknown method: " << gstatus.error_code() << " " << gstatus.error_message() << "\n";
  return 0;
}
