#include "tracing_setup.hpp"

#include <cstdio>

#include "core/log.hpp"
#include "tracing/otlp_transport.hpp"

namespace sluice {

void tracing_holder::start(boost::asio::io_context& control) const {
  if (exporter) exporter->start(control);
}

void tracing_holder::stop() const {
  if (exporter) exporter->stop();
}

tracing_holder make_tracing(const tracing::settings& settings, unsigned workers,
                            boost::asio::io_context& control, stats::store& stats) {
  tracing_holder t;
  if (!settings.enabled) {
    core::log_info("Tracing disabled");
    return t;
  }
  const bool grpc = settings.exporter.protocol == tracing::export_protocol::grpc;
  auto transport = grpc ? tracing::make_otlp_grpc(settings.exporter, control.get_executor())
                        : tracing::make_otlp_http(settings.exporter, control.get_executor());
  t.sampler = std::make_unique<tracing::sampler>(settings.sampler.ratio, settings.sampler.parent_based);
  t.exporter = std::make_unique<tracing::batch_exporter>(settings, workers, std::move(transport), stats);
  for (unsigned i = 0; i < workers; ++i) {
    t.tracers.push_back(
        std::make_unique<tracing::tracer>(*t.sampler, t.exporter->queue(i), t.exporter->dropped()));
  }
  char rate[32];
  std::snprintf(rate, sizeof rate, "%f", settings.sampler.ratio);  // Go's %f
  const auto& r = settings.resource;
  core::log_info(
      "TracerProvider initialized with following parameters: protocol: ", grpc ? "grpc" : "http",
      ", serviceName: ", r.service_name, ", serviceNamespace: ", r.service_namespace,
      ", serviceInstanceId: ", r.service_instance_id, ", samplingRate: ", rate,
      settings.sampler.name == "parentbased_traceidratio" ? "" : core::cat(" (", settings.sampler.name, ")"));
  core::log_info("Exporting spans to ", settings.exporter.endpoint);
  return t;
}

}  // namespace sluice
