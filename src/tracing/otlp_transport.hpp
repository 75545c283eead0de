#pragma once
// How a batch reaches the collector: OTLP over HTTP (otlp_http) or gRPC (otlp_grpc). Both run their I/O for
// the exporter on the control thread's io_context, never on a worker.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "tracing/settings.hpp"

namespace sluice::tracing {

struct export_result {
  enum class kind { ok, retry, fail } outcome = kind::ok;  // retry: the collector may take it later
  std::string error;                                       // for the log
  bool unanswered = false;  // the connection failed before any answer (a kept-alive one may have been closed)
};

class otlp_transport {
 public:
  virtual ~otlp_transport() = default;
  // One Export call with an ExportTraceServiceRequest's bytes, within `timeout`.
  virtual boost::asio::awaitable<export_result> send(const std::string& request,
                                                     std::chrono::milliseconds timeout) = 0;
  // Ends what is in flight at once (it fails): the exporter is stopping.
  virtual void cancel() = 0;
};

// The transport the settings name. Throws std::runtime_error naming the setting of a file it cannot load.
std::unique_ptr<otlp_transport> make_otlp_http(const exporter_settings& settings,
                                               const boost::asio::any_io_executor& executor);
std::unique_ptr<otlp_transport> make_otlp_grpc(const exporter_settings& settings,
                                               const boost::asio::any_io_executor& executor);

}  // namespace sluice::tracing
