// OTLP/gRPC: opentelemetry.proto.collector.trace.v1.TraceService/Export with gRPC C++'s generic stub (the
// request is already encoded) and callback API. The call runs on gRPC's threads; its end is posted back to
// the exporter's executor. Retryable codes are the OTLP specification's (CANCELLED, DEADLINE_EXCEEDED,
// ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS; not RESOURCE_EXHAUSTED, retried there only with a RetryInfo,
// which Sluice does not read).

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "core/read_file.hpp"
#include "core/strings.hpp"
#include "net/grpc/status.hpp"
#include "tracing/otlp_transport.hpp"

namespace sluice::tracing {

namespace {

namespace asio = boost::asio;
constexpr const char* export_method = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

std::string read_pem(const std::string& file, std::string_view setting) {
  if (file.empty()) return {};
  auto text = core::read_file(file);
  if (!text)
    throw std::runtime_error(core::cat("invalid file '", file, "' for ", setting, ": ", text.error()));
  return *text;
}

std::shared_ptr<grpc::Channel> make_channel(const exporter_settings& s) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (s.tls) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = read_pem(s.ca_file, "OTEL_EXPORTER_OTLP_CERTIFICATE");  // empty: gRPC's roots
    tls.pem_cert_chain = read_pem(s.client_cert_file, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE");
    tls.pem_private_key = read_pem(s.client_key_file, "OTEL_EXPORTER_OTLP_CLIENT_KEY");
    credentials = grpc::SslCredentials(tls);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(s.endpoint, credentials, grpc::ChannelArguments());
}

bool retryable(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DATA_LOSS:
      return true;
    default:
      return false;
  }
}

// What the calls in flight share with the transport: a transport being destroyed cancels them and waits,
// so no callback ever posts to an executor that is gone.
struct calls_in_flight {
  std::mutex mutex;
  std::condition_variable idle;
  std::vector<grpc::ClientContext*> contexts;
};

class otlp_grpc final : public otlp_transport {
 public:
  otlp_grpc(const exporter_settings& s, asio::any_io_executor ex)
      : settings_(s), executor_(std::move(ex)), stub_(make_channel(s)) {}

  void cancel() override {
    std::lock_guard lock(calls_->mutex);
    for (auto* c : calls_->contexts) c->TryCancel();
  }

  ~otlp_grpc() override {
    std::unique_lock lock(calls_->mutex);
    for (auto* c : calls_->contexts) c->TryCancel();
    calls_->idle.wait(lock, [this] { return calls_->contexts.empty(); });
  }

  asio::awaitable<export_result> send(const std::string& request,
                                      std::chrono::milliseconds timeout) override {
    struct call {
      grpc::ClientContext context;
      grpc::ByteBuffer request;  // a copy: the caller's may be gone before gRPC is done with it
      grpc::ByteBuffer response;
    };
    auto c = std::make_shared<call>();
    grpc::Slice slice(request);
    c->request = grpc::ByteBuffer(&slice, 1);
    c->context.set_deadline(std::chrono::system_clock::now() + timeout);
    if (settings_.gzip) c->context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
    for (const auto& [name, value] : settings_.headers) {
      c->context.AddMetadata(core::ascii_lower(name), value);
    }
    // Started from a named initiation, not a temporary in the co_await's expression (g++ 12).
    auto start = [this, c](auto handler) {
      auto shared = std::make_shared<decltype(handler)>(std::move(handler));
      {
        std::lock_guard lock(calls_->mutex);
        calls_->contexts.push_back(&c->context);
      }
      stub_.UnaryCall(&c->context, method_, {}, &c->request, &c->response,
                      [c, shared, calls = calls_, ex = executor_](grpc::Status s) {
                        asio::post(ex, [shared, s] { std::move (*shared)(s); });
                        std::lock_guard lock(calls->mutex);
                        std::erase(calls->contexts, &c->context);
                        calls->idle.notify_all();
                      });
    };
    const grpc::Status status =
        co_await asio::async_initiate<decltype(asio::use_awaitable), void(grpc::Status)>(std::move(start),
                                                                                         asio::use_awaitable);
    if (status.ok()) co_return export_result{};
    co_return export_result{
        retryable(status.error_code()) ? export_result::kind::retry : export_result::kind::fail,
        core::cat("rpc error: code = ", net::grpc::status_name(status.error_code()),
                  " desc = ", status.error_message())};
  }

 private:
  const exporter_settings settings_;
  asio::any_io_executor executor_;
  grpc::GenericStub stub_;
  const std::string method_ = export_method;  // gRPC keeps a pointer to it during calls
  std::shared_ptr<calls_in_flight> calls_ = std::make_shared<calls_in_flight>();
};

}  // namespace

std::unique_ptr<otlp_transport> make_otlp_grpc(const exporter_settings& settings,
                                               const asio::any_io_executor& executor) {
  return std::make_unique<otlp_grpc>(settings, executor);
}

}  // namespace sluice::tracing
