#pragma once
// The process's open file limit (RLIMIT_NOFILE). Every connection takes a descriptor, so the soft limit is
// raised to the hard one at start-up (as the Go runtime does for upstream), and the default connection cap
// leaves a reserve below it for backend connections, listeners and files.

#include <cstddef>
#include <cstdint>

namespace sluice::core {

struct open_file_limit {
  std::uint64_t before = 0;  // the soft limit Sluice was started with
  std::uint64_t now = 0;     // the soft limit after raising it
};

// Raises the soft limit to the hard one (or to fs.nr_open when the hard limit is unlimited). Never fails:
// when the kernel refuses, the limit stays as it was.
open_file_limit raise_open_file_limit();

// Descriptors kept back from connections: an eighth of the limit, at least 32 and at most 1024.
std::uint64_t reserved_descriptors(std::uint64_t limit);

// The default MAX_CONNECTIONS for a limit: what is left after the reserve.
std::uint64_t default_max_connections(std::uint64_t limit);

}  // namespace sluice::core
