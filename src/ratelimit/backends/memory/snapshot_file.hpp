#pragma once
// MEMORY_SNAPSHOT_FILE on disk: the memory backend's counters written atomically (a temporary file in the
// same folder, fsync, rename, fsync of the folder: a crash leaves the old file or the new one, never half of
// one), and read back at start. The format is snapshot_format.hpp's.

#include <cstdint>
#include <optional>
#include <string>

#include "core/problem.hpp"
#include "ratelimit/backends/memory/memory_backend.hpp"

namespace sluice::ratelimit::backends::memory {

struct snapshot_result {
  std::size_t counters = 0;  // written, or restored
  std::size_t dropped = 0;   // read: their windows had ended (or no room was left: MEMORY_MAX_COUNTERS)
  double milliseconds = 0;
};

// Whether a file can be made in the folder `path` names (a probe file, made and removed); why not.
core::problem check_snapshot_folder(const std::string& path);

// Writes every live counter of `backend`; throws std::runtime_error naming the file and the reason.
snapshot_result write_snapshot(const memory_backend& backend, const std::string& path, std::int64_t now);

// Restores the counters of the file whose windows are still current. A missing file restores nothing; a file
// that cannot be read gives the reason (the backend is left empty).
struct restore_outcome {
  snapshot_result result;
  bool missing = false;
  std::optional<std::string> error;
};
restore_outcome restore_snapshot(memory_backend& backend, const std::string& path, std::int64_t now);

}  // namespace sluice::ratelimit::backends::memory
