#include "tracing/tracer.hpp"

namespace sluice::tracing {

bool span_queue::push(finished_span&& span) noexcept {
  std::lock_guard lock(mutex_);
  if (spans_.size() >= capacity_) return false;
  spans_.push_back(std::move(span));
  size_.store(spans_.size(), std::memory_order_relaxed);
  return true;
}

std::vector<finished_span> span_queue::take_all() {
  // The worker's next buffer is allocated here, on the exporter's thread: a push never allocates.
  std::vector<finished_span> out;
  out.reserve(capacity_);
  std::lock_guard lock(mutex_);
  out.swap(spans_);
  size_.store(0, std::memory_order_relaxed);
  return out;
}

span& span::operator=(span&& other) noexcept {
  if (this != &other) {
    end();
    tracer_ = other.tracer_;
    data_ = std::move(other.data_);
    dropped_ = other.dropped_;
  }
  return *this;
}

void span::set_attribute(std::string key, attribute_value value) {
  if (data_) data_->attributes.emplace_back(std::move(key), std::move(value));
}

void span::set_error(std::string message) {
  if (!data_) return;
  data_->error = true;
  data_->status_message = std::move(message);
}

void span::end() {
  if (data_) tracer_->finish(std::move(data_));
}

tracer::tracer(const sampler& sampler, span_queue& queue, stats::counter& dropped)
    : sampler_(sampler), queue_(queue), dropped_(dropped), random_(std::random_device{}()) {}

std::uint64_t tracer::now_unix_nano() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::array<std::uint8_t, 8> tracer::new_span_id() {
  std::array<std::uint8_t, 8> id{};
  do {
    const auto r = random_();
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(r >> (8 * i));
  } while (id == std::array<std::uint8_t, 8>{});  // all zero is invalid
  return id;
}

span tracer::make(std::string_view name, span_kind kind) {
  span s;
  // A full queue now would drop the span when it ends: not recording it at all costs nothing.
  if (!queue_.has_room()) {
    dropped_.inc();
    s.dropped_ = true;
    return s;
  }
  s.tracer_ = this;
  s.data_ = std::make_unique<finished_span>();
  s.data_->name = name;
  s.data_->kind = kind;
  s.data_->span_id = new_span_id();
  s.data_->start_unix_nano = now_unix_nano();
  return s;
}

span tracer::start(std::string_view name, span_kind kind, const std::optional<span_context>& parent) {
  if (!parent && sampler_.samples_no_root()) return {};
  std::array<std::uint8_t, 16> trace_id{};
  if (parent) {
    trace_id = parent->trace_id;
  } else {
    do {
      const auto hi = random_(), lo = random_();
      for (std::size_t i = 0; i < 8; ++i) {
        trace_id[i] = static_cast<std::uint8_t>(hi >> (8 * i));
        trace_id[8 + i] = static_cast<std::uint8_t>(lo >> (8 * i));
      }
    } while (trace_id == std::array<std::uint8_t, 16>{});
  }
  if (!sampler_.sample(parent, trace_id)) return {};
  auto s = make(name, kind);
  if (!s.recording()) return s;
  s.data_->trace_id = trace_id;
  if (parent) {
    s.data_->parent_span_id = parent->span_id;
    s.data_->parent_is_remote = true;
    s.data_->trace_state = parent->tracestate;
  }
  return s;
}

span tracer::start_child(const span& parent, std::string_view name, span_kind kind) {
  if (parent.dropped_) {
    dropped_.inc();
    span s;
    s.dropped_ = true;
    return s;
  }
  if (!parent.recording()) return {};
  auto s = make(name, kind);
  if (!s.recording()) return s;
  s.data_->trace_id = parent.data_->trace_id;
  s.data_->parent_span_id = parent.data_->span_id;
  s.data_->trace_state = parent.data_->trace_state;
  return s;
}

void tracer::finish(std::unique_ptr<finished_span> data) {
  data->end_unix_nano = now_unix_nano();
  if (!queue_.push(std::move(*data))) dropped_.inc();
}

}  // namespace sluice::tracing
