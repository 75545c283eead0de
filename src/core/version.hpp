#pragma once

namespace sluice::core {
// The project's semantic version (meson's project version), e.g. "1.1.0". Defined in a file generated from
// version.cpp.in, so a version bump recompiles that file alone.
extern const char* const version;
}  // namespace sluice::core
