#pragma once
// What the limiter asks a counter store to do with one key: the fields every op has, and its algorithm's own
// fields as one alternative of a variant. The arithmetic of each algorithm is in a header of its own
// (fixed_window.hpp, sliding_window.hpp, gcra.hpp, leases.hpp); algorithms.hpp judges any op by its kind.

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>

namespace sluice::ratelimit::limiter {

// A fixed window's counter: INCRBY and EXPIRE, whatever the decision (upstream's counting).
struct fixed_window_op {
  std::uint64_t limit = 0;      // the most the count may reach
  std::int64_t window_end = 0;  // when the window ends (Unix seconds)
};

// A sliding window: the current window's counter, judged with the previous window's (sliding_window.hpp);
// counts only what it admits.
struct sliding_window_op {
  std::uint64_t limit = 0;
  std::int64_t window_end = 0;
  std::string_view previous_key;  // the previous window's counter
  std::int64_t window_us = 0;     // the window's length
  // When the window began, for a calendar window (config/calendar.hpp); 0 for an epoch-aligned one, which
  // began at now − now % window.
  std::int64_t window_start_us = 0;
};

// GCRA (gcra.hpp): a theoretical arrival time in microseconds, moved on only when the op admits.
struct gcra_op {
  std::int64_t emission_us = 0;   // T: the window over the limit
  std::int64_t tolerance_us = 0;  // burst × T
};

// How a concurrency limit without `holder_key` counts its leases (leases.hpp): per slice of time.
struct lease_timing {
  std::int64_t slice_us = 1'000'000;  // S
  std::int64_t slices = 1;            // K
};

// A concurrency limit without `holder_key` (leases.hpp, apply_lease_op): acquisitions counted per slice of
// time; an acquisition when it admits, a release (refund) gives back the oldest slices' slots.
struct lease_op {
  std::uint64_t limit = 0;
  lease_timing timing;
};

// A concurrency limit with `holder_key` (leases.hpp, apply_holder_op): one lease per holder, in a store's own
// type of key; an acquisition when it admits, a release (refund) frees the holder's slots.
struct holder_op {
  std::uint64_t limit = 0;
  std::int64_t lease_us = 0;
  // This op's holder; none (operator control only) addresses the whole set.
  std::optional<std::string_view> holder;
};

using op_algorithm = std::variant<fixed_window_op, sliding_window_op, gcra_op, lease_op, holder_op>;

// What an op keeps in the store, as the stores tell it apart (the Redis script's letters, the memory store's
// maps): a counter, a sliding window's, an arrival time, or leases (both concurrency forms).
enum class op_kind : std::uint8_t { count, sliding, gcra, concurrency };

struct counter_op {
  std::string_view key;
  std::uint64_t increment = 0;
  // Window length + jitter; refreshed on every increment, as upstream's EXPIRE.
  std::uint32_t ttl_seconds = 0;
  bool per_second = false;  // the limit's unit is SECOND (a dedicated per-second store may take it)
  // Negative hits: subtract `increment` instead, never going below 0, keeping the counter's TTL; a counter
  // that does not exist stays absent (its result is 0). For GCRA: move the arrival time back, not before now.
  bool refund = false;
  // `accounting: usage`: the hits were spent already, so they always count, whatever the verdict (a sliding
  // window counts past its limit, a GCRA arrival time moves past its tolerance: debt), also in an
  // all-or-nothing batch that does not apply; and an op of 0 hits (a check) is over when no hit is left.
  bool usage = false;
  std::int64_t now_us = 0;  // the decision's time
  // All-or-nothing batches apply when the request is admitted, which is what `role` says of this op's
  // admission: see op_role.
  std::uint32_t role = 0;
  op_algorithm algorithm;
  std::string_view rule;  // the limit's stats key (several regions: its overshoot gauge)

  op_kind kind() const {
    static constexpr op_kind kinds[] = {op_kind::count, op_kind::sliding, op_kind::gcra, op_kind::concurrency,
                                        op_kind::concurrency};
    return kinds[algorithm.index()];
  }
  bool per_holder() const { return std::holds_alternative<holder_op>(algorithm); }
  // The algorithm's fields, when the op is of that algorithm (else null).
  template <typename Algorithm>
  const Algorithm* as() const {
    return std::get_if<Algorithm>(&algorithm);
  }
  // The most the count may reach (every algorithm but GCRA, which has 0: it has a tolerance instead).
  std::uint64_t limit() const {
    return std::visit(
        [](const auto& a) -> std::uint64_t {
          if constexpr (requires { a.limit; }) {
            return a.limit;
          } else {
            return 0;
          }
        },
        algorithm);
  }
};

// An op's part in an all-or-nothing batch's verdict (algorithms.hpp, batch_verdict): the batch applies when
// every enforced op admits and, if any op has a quota role, every op of at least one quota descriptor admits
// (the request's answer under quota mode). Advisory ops (shadow-mode limits, or quota descriptors the answer
// no longer depends on) never hold the batch back. When the batch applies, each op is applied as an
// independent one would be: fixed-window counters always, the others when they admit.
namespace op_role {
inline constexpr std::uint32_t enforced = 0;
inline constexpr std::uint32_t advisory = 1;
inline constexpr std::uint32_t first_quota = 2;  // quota descriptor d: first_quota + d
}  // namespace op_role

}  // namespace sluice::ratelimit::limiter
