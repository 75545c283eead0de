#pragma once
// Gives the memory the allocator holds free back to the system: after a large one-off load (a limit table of
// millions of rows parsed from a file), the file's bytes and the parser's scratch would otherwise stay
// resident.

namespace sluice::core {

void release_free_memory();

}  // namespace sluice::core
