#pragma once
// Global in-flight limits (`algorithm: concurrency`): the arithmetic of a descriptor's leases, shared by the
// memory store and mirrored by the Redis decide script (a HASH of slice → count). Acquisitions are counted
// per slice of time (S = lease / 16 rounded up to a second, K = lease / S rounded up): an acquisition made in
// slice s stops counting once the slice now is past s + K, so a lost release frees its slot between the lease
// and the lease + 2·S after it was made, never before. Releases carry no identity: they take from the newest
// slices first, so the oldest counts — a lost release's among them — are the ones that expire.

#include <algorithm>
#include <cstdint>
#include <utility>

#include <boost/container/small_vector.hpp>

namespace sluice::ratelimit::limiter {

struct lease_timing {
  std::int64_t slice_us = 1'000'000;  // S
  std::int64_t slices = 1;            // K
};

inline lease_timing lease_timing_of(std::int64_t lease_seconds) {
  const std::int64_t slice = std::max<std::int64_t>(1, (lease_seconds + 15) / 16);
  return {slice * 1'000'000, std::max<std::int64_t>(1, (lease_seconds + slice - 1) / slice)};
}

// (slice number, acquisitions still held), in ascending slice order.
using lease_slices = boost::container::small_vector<std::pair<std::int64_t, std::uint64_t>, 4>;

struct lease_outcome {
  std::uint64_t before = 0;        // held before the op (after expiry)
  std::uint64_t value = 0;         // held after it, were it applied
  std::uint64_t expired = 0;       // acquisitions whose leases ended, dropped now
  std::int64_t oldest_end_us = 0;  // when the oldest lease still held ends (0: none)
  bool admitted = true;
};

// Applies an op of `hits` (given back when `release`) at `now_us` against `limit`; a check (0 hits) admits
// when one more would fit. A refused acquisition takes nothing.
inline lease_outcome apply_lease_op(lease_slices& held, const lease_timing& t, std::int64_t now_us,
                                    std::uint64_t hits, bool release, std::uint64_t limit) {
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
      auto& newest = held.back();
      const std::uint64_t take = std::min(left, newest.second);
      newest.second -= take;
      left -= take;
      if (newest.second == 0) held.pop_back();
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
  if (!held.empty()) out.oldest_end_us = (held.front().first + t.slices + 1) * t.slice_us;
  return out;
}

}  // namespace sluice::ratelimit::limiter
