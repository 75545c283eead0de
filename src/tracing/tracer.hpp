#pragma once
// Recording spans on a worker. Each worker has a tracer, used only on its thread, and a span_queue that the
// exporter empties from the control thread. A decision never waits on export: a span that finds the queue
// full is dropped and counted (tracing.spans_dropped), and so are the spans under it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "stats/store.hpp"
#include "tracing/propagation.hpp"
#include "tracing/sampler.hpp"
#include "tracing/span.hpp"

namespace sluice::tracing {

// A worker's finished spans waiting for the exporter: bounded. The worker pushes; the exporter takes.
class span_queue {
 public:
  explicit span_queue(std::size_t capacity) : capacity_(capacity) { spans_.reserve(capacity); }

  bool has_room() const { return size_.load(std::memory_order_relaxed) < capacity_; }
  // False, and the span is dropped, when the queue is full. Never allocates (the room is reserved).
  bool push(finished_span&& span) noexcept;
  // Everything queued, oldest first.
  std::vector<finished_span> take_all();
  std::size_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  const std::size_t capacity_;
  std::atomic<std::size_t> size_{0};
  std::mutex mutex_;  // held for a push or a swap only: uncontended but for the exporter's visits
  std::vector<finished_span> spans_;
};

class tracer;

// A span being recorded, or an empty handle when its request is not sampled (or was dropped): then every call
// is a no-op, and spans started under it are not recorded either. Ends (and is queued) when end() is called
// or the handle is destroyed.
class span {
 public:
  span() = default;
  span(span&& other) noexcept
      : tracer_(other.tracer_), data_(std::move(other.data_)), dropped_(other.dropped_) {}
  span& operator=(span&& other) noexcept;
  ~span() { end(); }

  bool recording() const { return data_ != nullptr; }
  void set_attribute(std::string key, attribute_value value);
  // Status ERROR with this description.
  void set_error(std::string message);
  void end();

 private:
  friend class tracer;
  tracer* tracer_ = nullptr;
  std::unique_ptr<finished_span> data_;
  bool dropped_ = false;  // sampled, but the queue was full: the spans under it are dropped too
};

class tracer {
 public:
  tracer(const sampler& sampler, span_queue& queue, stats::counter& dropped);

  // A request's first span: a child of `parent` (the context it came with) when there is one, else the root
  // of a new trace; recorded when the sampler says so.
  span start(std::string_view name, span_kind kind, const std::optional<span_context>& parent);
  // A span inside `parent`, recorded when `parent` is.
  span start_child(const span& parent, std::string_view name, span_kind kind = span_kind::internal);

 private:
  friend class span;
  span make(std::string_view name, span_kind kind);
  void finish(std::unique_ptr<finished_span> data);
  std::array<std::uint8_t, 8> new_span_id();
  static std::uint64_t now_unix_nano();

  const sampler& sampler_;
  span_queue& queue_;
  stats::counter& dropped_;
  std::mt19937_64 random_;
};

}  // namespace sluice::tracing
