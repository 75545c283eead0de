#pragma once
// OpenTelemetry's batch span processor for Sluice's workers, on the control thread: every worker records into
// its own bounded span_queue; the exporter empties them when a batch is full or the schedule delay has passed
// (OTEL_BSP_*), and sends batches of at most OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans, one at a time. A batch the
// collector cannot take is retried with backoff until OTEL_BSP_EXPORT_TIMEOUT, then dropped and counted; an
// outage is logged when it starts and when it ends, not per batch.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <vector>

#include "stats/store.hpp"
#include "tracing/otlp_transport.hpp"
#include "tracing/settings.hpp"
#include "tracing/tracer.hpp"

namespace sluice::tracing {

class batch_exporter {
 public:
  // One queue per worker; the queue size is shared out among them.
  batch_exporter(const settings& settings, std::size_t workers, std::unique_ptr<otlp_transport> transport,
                 stats::store& stats);
  ~batch_exporter();

  span_queue& queue(std::size_t worker) { return *queues_[worker]; }
  stats::counter& dropped() { return dropped_; }

  // Runs on `control` until stop().
  void start(boost::asio::io_context& control);
  // On the control thread: what is in flight is cancelled; what is queued gets one more try of at most a
  // second per batch (none after a batch fails), then the exporter ends.
  void stop();

 private:
  boost::asio::awaitable<void> run();
  std::vector<finished_span> take_queued();
  boost::asio::awaitable<void> export_queued();
  boost::asio::awaitable<bool> send_with_retry(const std::string& request);
  std::size_t queued() const;

  const settings settings_;
  std::vector<std::unique_ptr<span_queue>> queues_;
  std::unique_ptr<otlp_transport> transport_;
  stats::counter& dropped_;
  stats::counter& exported_;
  std::unique_ptr<boost::asio::steady_timer> timer_;
  bool stopping_ = false;
  bool failing_ = false;  // in an outage: logged once when it starts
};

}  // namespace sluice::tracing
