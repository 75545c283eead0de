// A benchmark probe, not part of Sluice: what it costs gRPC 1.51 to finish a unary ShouldRateLimit call from
// an Asio io thread instead of inside the handler, with the callback API (Sluice's) and with the
// completion-queue API. The answer is fixed (OK); no rate limiting happens. BENCHMARKS.md (issue 3) has the
// figures.
//
//   grpc_handoff_probe MODE PORT     (then load it with h2load; scripts/bench grpc-handoff does both)
//   MODE: cb-inline  callback API, Finish in the handler (what the memory backend does)
//         cb-post    callback API, work posted to the io thread, Finish there (what the Redis backend does)
//         cb-alarm   as cb-post, but the io thread queues the calls and a grpc::Alarm finishes each batch on
//         a
//                    gRPC thread
//         cq-inline  completion-queue API, one thread polling the queue, Finish there
//         cq-post    completion-queue API, Finish from the io thread

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rls.grpc.pb.h"

namespace {

namespace asio = boost::asio;
using envoy::service::ratelimit::v3::RateLimitRequest;
using envoy::service::ratelimit::v3::RateLimitResponse;
using envoy::service::ratelimit::v3::RateLimitService;

asio::io_context io(1);

void answer(RateLimitResponse& response) {
  response.set_overall_code(RateLimitResponse::OK);
  response.add_statuses()->set_code(RateLimitResponse::OK);
}

// cb-alarm: calls completed on the io thread, finished in batches from an alarm's callback on a gRPC thread.
class alarm_batches {
 public:
  void push(grpc::ServerUnaryReactor* reactor) {
    std::lock_guard lock(mutex_);
    queued_.push_back(reactor);
    if (alarm_) return;
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm_->Set(gpr_now(GPR_CLOCK_MONOTONIC), [this](bool) { finish_all(); });
  }

 private:
  void finish_all() {
    std::vector<grpc::ServerUnaryReactor*> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(queued_);
      spent_.push_back(std::move(alarm_));  // not destroyed inside its own callback; freed at exit
    }
    for (auto* reactor : batch) reactor->Finish(grpc::Status::OK);
  }

  std::mutex mutex_;
  std::vector<grpc::ServerUnaryReactor*> queued_;
  std::unique_ptr<grpc::Alarm> alarm_;
  std::vector<std::unique_ptr<grpc::Alarm>> spent_;
};

class callback_service final : public RateLimitService::CallbackService {
 public:
  explicit callback_service(std::string mode) : mode_(std::move(mode)) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context, const RateLimitRequest*,
                                            RateLimitResponse* response) override {
    auto* reactor = context->DefaultReactor();
    if (mode_ == "cb-inline") {
      answer(*response);
      reactor->Finish(grpc::Status::OK);
    } else if (mode_ == "cb-alarm") {
      asio::post(io, [this, reactor, response] {
        answer(*response);
        batches_.push(reactor);
      });
    } else {
      asio::post(io, [reactor, response] {
        answer(*response);
        reactor->Finish(grpc::Status::OK);
      });
    }
    return reactor;
  }

 private:
  std::string mode_;
  alarm_batches batches_;
};

// One call of the completion-queue API: asks for the next call, answers, then deletes itself when finished.
class queued_call {
 public:
  queued_call(RateLimitService::AsyncService& service, grpc::ServerCompletionQueue& queue, bool post)
      : service_(service), queue_(queue), post_(post) {
    service_.RequestShouldRateLimit(&context_, &request_, &responder_, &queue_, &queue_, this);
  }

  void proceed(bool ok) {
    if (finishing_ || !ok) {
      delete this;
      return;
    }
    new queued_call(service_, queue_, post_);
    finishing_ = true;
    if (!post_) return finish();
    asio::post(io, [this] { finish(); });
  }

 private:
  void finish() {
    answer(response_);
    responder_.Finish(response_, grpc::Status::OK, this);
  }

  RateLimitService::AsyncService& service_;
  grpc::ServerCompletionQueue& queue_;
  bool post_;
  bool finishing_ = false;
  grpc::ServerContext context_;
  RateLimitRequest request_;
  RateLimitResponse response_;
  grpc::ServerAsyncResponseWriter<RateLimitResponse> responder_{&context_};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s cb-inline|cb-post|cb-alarm|cq-inline|cq-post PORT\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  auto work = asio::make_work_guard(io);
  std::thread io_thread([] { io.run(); });
  grpc::ServerBuilder builder;
  builder.AddListeningPort(std::string("127.0.0.1:") + argv[2], grpc::InsecureServerCredentials());
  callback_service callbacks(mode);
  RateLimitService::AsyncService async;
  std::unique_ptr<grpc::ServerCompletionQueue> queue;
  if (mode.starts_with("cq-")) {
    builder.RegisterService(&async);
    queue = builder.AddCompletionQueue();
  } else {
    builder.RegisterService(&callbacks);
  }
  auto server = builder.BuildAndStart();
  if (!server) return 1;
  if (!queue) {
    server->Wait();
    return 0;
  }
  for (int i = 0; i < 1024; ++i) new queued_call(async, *queue, mode == "cq-post");  // ≥ streams in flight
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) static_cast<queued_call*>(tag)->proceed(ok);
  return 0;
}
