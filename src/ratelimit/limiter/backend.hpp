#pragma once
// The one seam between the backend-independent limiter and a counter store (upstream's DoLimit split in two
// primitive operations). Completion is a callback interface rather than a coroutine so that a store that
// needs no I/O (memory) can finish inline on the caller's thread — a gRPC decision then needs no hop to the
// io_context.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::ratelimit::limiter {

struct counter_op {
  std::string_view key;
  std::uint64_t increment = 0;
  std::uint32_t ttl_seconds =
      0;                    // window length + jitter; refreshed on every increment, as upstream's EXPIRE
  bool per_second = false;  // the limit's unit is SECOND (a dedicated per-second store may take it)
  // Negative hits: subtract `increment` instead, never going below 0, keeping the counter's TTL; a counter
  // that does not exist stays absent (its result is 0).
  bool refund = false;
};

struct backend_error {
  std::string message;
};

class completion {
 public:
  // Called exactly once per operation, possibly before the operation's call returns. Null means success.
  virtual void complete(const backend_error* error) noexcept = 0;

 protected:
  ~completion() = default;
};

// The span upstream records around a store's round trip (reference §1.9): its name and counts.
struct trace_description {
  const char* name = nullptr;  // null: no span (a store without I/O)
  std::array<std::pair<const char*, std::int64_t>, 2> counts{};
  std::size_t count_size = 0;
};

class backend {
 public:
  virtual ~backend() = default;
  // What tracing records around increment(ops): upstream's span for this store.
  virtual trace_description describe_for_trace(std::span<const counter_op> /*ops*/) const { return {}; }
  // Adds ops[i].increment to the counter ops[i].key (creating it), or takes it away for a refund, and writes
  // the value after the change to results[i]; each op is atomic on its counter. The spans stay valid until
  // done.complete() is called.
  virtual void increment(std::span<const counter_op> ops, std::span<std::uint64_t> results,
                         completion& done) = 0;
  // Writes the current value of each counter (0 when absent) to results[i]; used before incrementing when
  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is on.
  virtual void get(std::span<const counter_op> ops, std::span<std::uint64_t> results, completion& done) = 0;
};

}  // namespace sluice::ratelimit::limiter
