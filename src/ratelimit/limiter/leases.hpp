#pragma once
// Global in-flight limits (`algorithm: concurrency`): the arithmetic of a descriptor's leases, shared by the
// memory store and mirrored by the Redis decide script. Two forms:
//
// - With `holder_key` (apply_holder_op): each acquisition names its holder (an entry of the descriptor, such
//   as x-request-id). One lease per holder: n slots until now + lease, renewed by a repeated acquisition; a
//   release frees that holder's slots and nothing else. A lost release frees its slots exactly when the lease
//   ends; a refused request's release (Envoy sends one at stream done) frees nothing, its holder holds none.
//
// - Without (apply_lease_op): acquisitions are counted per slice of time (S = lease / 16 rounded up to a
//   second, K = lease / S rounded up), a HASH of slice -> count in Redis. An acquisition made in slice s
//   stops counting once the slice now is past s + K, so a lost release frees its slot between the lease and
//   the lease + 2·S after it was made. Releases carry no identity: they give back the OLDEST slices first, so
//   that every slot still held stays counted in a slice at least as new as its acquisition, and can never
//   expire while it is held for less than the lease (releasing the newest first let a held slot's count sit
//   in an old slice and expire under steady churn: over-admission after about one lease). The cost: a lost
//   release's count moves forward with every later release, so it is freed only once the descriptor has been
//   idle for a lease; and a release that took nothing (a refused request's, behind Envoy) frees someone's
//   slot.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <boost/container/small_vector.hpp>

#include "ratelimit/limiter/counter_op.hpp"

namespace sluice::ratelimit::limiter {

inline lease_timing lease_timing_of(std::int64_t lease_seconds) {
  const std::int64_t slice = std::max<std::int64_t>(1, (lease_seconds + 15) / 16);
  return {slice * 1'000'000, std::max<std::int64_t>(1, (lease_seconds + slice - 1) / slice)};
}

// When the leases of the acquisitions made in `slice` end (µs): once the slice now is past slice + K. The
// Redis decide script computes the same (backends/redis/decide_script_lua.cpp, leases_end).
inline std::int64_t slice_lease_end_us(std::int64_t slice, const lease_timing& t) {
  return (slice + t.slices + 1) * t.slice_us;
}

// (slice number, acquisitions still held), in ascending slice order.
using lease_slices = boost::container::small_vector<std::pair<std::int64_t, std::uint64_t>, 4>;

struct lease_outcome {
  std::uint64_t before = 0;        // held before the op (after expiry)
  std::uint64_t value = 0;         // held after it, were it applied
  std::uint64_t expired = 0;       // acquisitions whose leases ended, dropped now
  std::int64_t oldest_end_us = 0;  // when the oldest lease still held ends (0: none)
  std::uint64_t holders = 0;       // with holder_key: holders after the op
  std::uint64_t holder_slots = 0;  // with holder_key: what this op's holder held before it
  bool admitted = true;
};

// Which held slice a release takes from next: the oldest, as above. A parameter of apply_lease_op so that the
// simulator (tests/sim) can check that its invariants catch the other order; every store uses this one.
struct oldest_slice_first {
  std::size_t operator()(const lease_slices& /*held*/) const { return 0; }
};

// Applies an op of `hits` (given back when `release`) at `now_us` against `limit`; a check (0 hits) admits
// when one more would fit. A refused acquisition takes nothing.
template <typename ReleaseOrder = oldest_slice_first>
inline lease_outcome apply_lease_op(lease_slices& held, const lease_timing& t, std::int64_t now_us,
                                    std::uint64_t hits, bool release, std::uint64_t limit,
                                    ReleaseOrder take_from = {}) {
  lease_outcome out;
  const std::int64_t now_slice = now_us / t.slice_us;
  while (!held.empty() && held.front().first < now_slice - t.slices) {
    out.expired += held.front().second;
    held.erase(held.begin());
  }
  for (const auto& s : held) out.before += s.second;
  if (release) {
    std::uint64_t left = hits;
    while (left > 0 && !held.empty()) {
      const auto next = held.begin() + static_cast<std::ptrdiff_t>(take_from(held));
      const std::uint64_t take = std::min(left, next->second);
      next->second -= take;
      left -= take;
      if (next->second == 0) held.erase(next);
    }
    out.value = out.before - (hits - left);
  } else {
    out.value = out.before + hits;
    out.admitted = out.value + (hits == 0 ? 1 : 0) <= limit;
    if (out.admitted && hits > 0) {
      if (!held.empty() && held.back().first == now_slice) {
        held.back().second += hits;
      } else {
        held.emplace_back(now_slice, hits);
      }
    }
  }
  if (!held.empty()) out.oldest_end_us = slice_lease_end_us(held.front().first, t);
  return out;
}

// One holder's lease: its slots, held until end_us.
struct holder_lease {
  std::string holder;
  std::uint64_t slots = 0;
  std::int64_t end_us = 0;
};
// A descriptor's holders (at most `limit` of them hold slots), in no order.
using lease_holders = boost::container::small_vector<holder_lease, 2>;

// Drops the holders whose leases have ended at `now_us` (end_us <= now_us); returns their slots.
inline std::uint64_t drop_ended(lease_holders& held, std::int64_t now_us) {
  std::uint64_t expired = 0;
  for (std::size_t i = held.size(); i-- > 0;) {
    if (held[i].end_us > now_us) continue;
    expired += held[i].slots;
    held[i] = std::move(held.back());
    held.pop_back();
  }
  return expired;
}

// When the latest of `held`'s leases ends (µs; 0: none).
inline std::int64_t latest_end(const lease_holders& held) {
  std::int64_t last = 0;
  for (const auto& h : held) last = std::max(last, h.end_us);
  return last;
}

// The outcome's totals over `held` (after the op).
inline void describe_holders(const lease_holders& held, lease_outcome& out) {
  out.holders = held.size();
  for (const auto& h : held)
    if (out.oldest_end_us == 0 || h.end_us < out.oldest_end_us) out.oldest_end_us = h.end_us;
}

// An op of `hits` by `holder` with leases of `lease_us`:
// - an acquisition by a holder that holds nothing takes `hits` slots until now + lease when they fit (a
//   check, 0 hits, admits when one more would fit, and takes nothing);
// - an acquisition by a holder that holds already (a resend, or a long call keeping its slot alive) counts
//   once and renews its lease: it holds max(its slots, hits), judged as an acquisition of the difference
//   (while the total is within the limit, a resend of the same hits admits); refused, it keeps what it held,
//   lease unchanged;
// - a release frees every slot of `holder` and nothing else.
inline lease_outcome apply_holder_op(lease_holders& held, std::int64_t lease_us, std::int64_t now_us,
                                     std::string_view holder, std::uint64_t hits, bool release,
                                     std::uint64_t limit) {
  lease_outcome out;
  out.expired = drop_ended(held, now_us);
  for (const auto& h : held) out.before += h.slots;
  auto it = std::find_if(held.begin(), held.end(), [&](const holder_lease& h) { return h.holder == holder; });
  if (it != held.end()) out.holder_slots = it->slots;
  if (release) {
    out.value = out.before - out.holder_slots;
    if (it != held.end()) held.erase(it);
  } else {
    const std::uint64_t extra = hits > out.holder_slots ? hits - out.holder_slots : 0;
    out.value = out.before + extra;
    // (judged as the limiter judges every op from its result: algorithms.hpp, admits)
    out.admitted = out.value + (hits == 0 ? 1 : 0) <= limit;
    if (out.admitted && hits > 0) {
      if (it != held.end()) {
        it->slots += extra;
        it->end_us = now_us + lease_us;
      } else {
        held.push_back({std::string(holder), hits, now_us + lease_us});
      }
    }
  }
  describe_holders(held, out);
  return out;
}

// What a holder-keyed descriptor holds at `now_us`, and what `holder` (when given) holds; changes nothing
// but dropping ended leases from the copy it is given.
inline lease_outcome inspect_holders(lease_holders held, std::int64_t now_us,
                                     const std::string_view* holder) {
  lease_outcome out;
  out.expired = drop_ended(held, now_us);
  for (const auto& h : held) {
    out.before += h.slots;
    if (holder != nullptr && h.holder == *holder) out.holder_slots = h.slots;
  }
  out.value = out.before;
  describe_holders(held, out);
  return out;
}

}  // namespace sluice::ratelimit::limiter
