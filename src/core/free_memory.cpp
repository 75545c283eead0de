#include "core/free_memory.hpp"

#ifdef SLUICE_NO_TCMALLOC
#include <malloc.h>
#else
#include <gperftools/malloc_extension.h>
#endif

namespace sluice::core {

void release_free_memory() {
#ifdef SLUICE_NO_TCMALLOC
  ::malloc_trim(0);
#else
  MallocExtension::instance()->ReleaseFreeMemory();
#endif
}

}  // namespace sluice::core
