#include "tracing/exporter.hpp"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <random>

#include "core/log.hpp"
#include "core/use_tuple.hpp"
#include "tracing/otlp_request.hpp"

namespace sluice::tracing {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

using core::use_tuple;
// How often the queues are looked at: a full batch leaves within this, whatever the schedule delay.
constexpr milliseconds poll_interval{50};
// Retries of one batch: exponential from 1 s to 8 s, with jitter, until OTEL_BSP_EXPORT_TIMEOUT.
constexpr milliseconds first_backoff{1000}, max_backoff{8000};
// The last try of each batch at shutdown.
constexpr milliseconds final_timeout{1000};

}  // namespace

batch_exporter::batch_exporter(const settings& settings, std::size_t workers,
                               std::unique_ptr<otlp_transport> transport, stats::store& stats)
    : settings_(settings),
      transport_(std::move(transport)),
      dropped_(stats.get_counter("tracing.spans_dropped")),
      exported_(stats.get_counter("tracing.spans_exported")) {
  const std::size_t each = std::max<std::size_t>(1, (settings.batch.max_queue_size + workers - 1) / workers);
  for (std::size_t i = 0; i < workers; ++i) queues_.push_back(std::make_unique<span_queue>(each));
}

batch_exporter::~batch_exporter() = default;

void batch_exporter::start(asio::io_context& control) {
  timer_ = std::make_unique<asio::steady_timer>(control);
  asio::co_spawn(control, run(), asio::detached);
}

void batch_exporter::stop() {
  stopping_ = true;
  if (timer_) timer_->cancel();
  transport_->cancel();  // what is in flight fails now; what is queued goes once more, briefly
}

std::size_t batch_exporter::queued() const {
  std::size_t n = 0;
  for (const auto& q : queues_) n += q->size();
  return n;
}

asio::awaitable<void> batch_exporter::run() {
  auto last_export = clock::now();
  while (!stopping_) {
    timer_->expires_after(std::min<milliseconds>(poll_interval, settings_.batch.schedule_delay));
    co_await timer_->async_wait(use_tuple);
    if (stopping_) break;
    const auto n = queued();
    if (n == 0) {
      last_export = clock::now();
      continue;
    }
    if (n < settings_.batch.max_export_batch_size &&
        clock::now() - last_export < settings_.batch.schedule_delay)
      continue;
    co_await export_queued();
    last_export = clock::now();
  }
  co_await export_queued();
}

std::vector<finished_span> batch_exporter::take_queued() {
  std::vector<finished_span> spans;
  for (auto& q : queues_) {
    auto taken = q->take_all();
    std::move(taken.begin(), taken.end(), std::back_inserter(spans));
  }
  // Oldest first across the workers, so a batch holds the spans of one time.
  std::stable_sort(spans.begin(), spans.end(),
                   [](const auto& a, const auto& b) { return a.end_unix_nano < b.end_unix_nano; });
  return spans;
}

// (No co_await inside a condition or beside other temporaries: g++ 12 has destroyed such temporaries twice.)
asio::awaitable<void> batch_exporter::export_queued() {
  std::vector<finished_span> spans;
  bool given_up = false;  // stopping, and a batch failed: the rest is dropped at once
  const std::size_t size = settings_.batch.max_export_batch_size;
  std::size_t at = 0;  // spans before it are counted
  try {
    spans = take_queued();
    for (; at < spans.size(); at += size) {
      const std::size_t n = std::min(size, spans.size() - at);
      bool sent = false;
      if (!given_up) {
        const auto request = encode_export_request(settings_.resource, std::span(spans).subspan(at, n));
        sent = co_await send_with_retry(request);
        given_up = !sent && stopping_;
      }
      (sent ? exported_ : dropped_).add(n);
    }
  } catch (const std::exception& e) {
    // Out of memory, most likely: these spans are lost, the exporter goes on.
    core::log_error("Cannot export spans: ", e.what());
    dropped_.add(spans.size() - std::min(at, spans.size()));
  }
}

asio::awaitable<bool> batch_exporter::send_with_retry(const std::string& request) {
  const auto& endpoint = settings_.exporter.endpoint;
  const auto deadline = clock::now() + settings_.batch.export_timeout;
  auto backoff = first_backoff;
  std::minstd_rand jitter(std::random_device{}());
  for (;;) {
    // Stopping, a batch has one more try, briefly: the shutdown's grace period is not the exporter's.
    const bool last = stopping_;
    const auto timeout =
        last ? std::min(settings_.exporter.timeout, final_timeout) : settings_.exporter.timeout;
    const export_result result = co_await transport_->send(request, timeout);
    if (result.outcome == export_result::kind::ok) {
      if (std::exchange(failing_, false)) core::log_warn("Exporting spans to ", endpoint, " again");
      co_return true;
    }
    if (stopping_ && !last) continue;  // cancelled by stop(): the last try follows at once
    if (!std::exchange(failing_, true)) {
      core::log_warn("Cannot export spans to ", endpoint, ": ", result.error,
                     result.outcome == export_result::kind::retry
                         ? " (retrying with backoff; spans are dropped and counted in tracing.spans_dropped "
                           "while this lasts)"
                         : " (the batch is dropped)");
    }
    // Half to all of the backoff, as OpenTelemetry's exporters spread their retries.
    const auto wait =
        milliseconds(backoff.count() / 2 + static_cast<long>(jitter() % (backoff.count() / 2 + 1)));
    if (result.outcome == export_result::kind::fail || last || clock::now() + wait > deadline)
      co_return false;
    timer_->expires_after(wait);
    co_await timer_->async_wait(use_tuple);  // cut short by stop(): then the last try
    backoff = std::min(backoff * 2, max_backoff);
  }
}

}  // namespace sluice::tracing
