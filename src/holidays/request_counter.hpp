#pragma once
// meta.requests: how many requests each API key has made since the server started. Thread-safe; a key's
// counter is created on its first request and survives reloads of the key file.

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

namespace sluice::holidays {

class request_counter {
 public:
  // Counts one more request of key `id` (auth::key_check::id); the count including it.
  std::int64_t add(std::uint64_t id);
  // The count so far (0 for a key never counted).
  std::int64_t get(std::uint64_t id) const;

 private:
  mutable std::shared_mutex mutex_;  // guards the map; the counters themselves are atomic
  std::unordered_map<std::uint64_t, std::unique_ptr<std::atomic<std::int64_t>>> counts_;
};

}  // namespace sluice::holidays
